package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgfailover/pgfailover/internal/backoff"
	"github.com/pgfailover/pgfailover/internal/clock"
	"github.com/pgfailover/pgfailover/internal/lograte"
	"github.com/pgfailover/pgfailover/kubernetes/internal/kubeapi"
	"github.com/pgfailover/pgfailover/topology"
)

// ErrWatching is returned by Watch when another Watch of the same Source
// is running.
var ErrWatching = errors.New("kubernetes: the Source is already being watched")

// SourceConfig configures a Source. Selector or Cluster is required.
type SourceConfig struct {
	// Namespace holds the pods (and the Cluster). "" means the
	// kubeconfig context's namespace, in a pod its own namespace, else
	// "default".
	Namespace string
	// Selector is a label selector for the PostgreSQL pods, such as
	// "cnpg.io/cluster=pg-main" or "application=spilo,cluster-name=acid".
	// "" with Cluster set means "cnpg.io/cluster=<Cluster>,cnpg.io/instanceRole":
	// the Cluster's instance pods.
	Selector string
	// Cluster names a CloudNativePG Cluster (postgresql.cnpg.io/v1) whose
	// status.currentPrimary and status.targetPrimary the Source follows,
	// so that the Pool learns of a switchover or failover as soon as the
	// operator decides it. "" follows pod labels only.
	Cluster string
	// RoleLabel names a pod label read for the role before the operators'
	// own (cnpg.io/instanceRole, spilo-role,
	// postgres-operator.crunchydata.com/role, and role on CloudNativePG
	// pods). Its values are read as theirs are, in any case: primary,
	// master or leader claim a primary; replica, standby, sync_standby,
	// quorum_standby or follower a replica; standby_leader a replica read
	// from last.
	RoleLabel string
	// ZoneLabel names the pod label that holds a pod's zone; "" means
	// DefaultZoneLabel.
	ZoneLabel string
	// PortName names the container port PostgreSQL listens on; "" means
	// the first port named "postgresql" or "postgres", else DefaultPort.
	PortName string
	// Kubeconfig is the path of a kubeconfig file. "" means in the
	// cluster when KUBERNETES_SERVICE_HOST is set and Context is "" (the
	// pod's service account), else $KUBECONFIG, else ~/.kube/config.
	Kubeconfig string
	// Context names a kubeconfig context; "" means the current one.
	Context string
	// Logger receives warnings (the API unreachable, pods left out), at
	// most one of each kind a minute, and a line when the API server
	// answers again; nil means silence.
	Logger *slog.Logger

	// backoff is the reflectors' pause after a failure; tests shorten it.
	backoff backoff.Exponential
	// clock times the pauses, the watches and the warnings; nil means
	// the wall clock.
	clock clock.Clock
}

// Source reports the pods of a PostgreSQL cluster on Kubernetes as a
// topology.Source. Create it with NewSource.
type Source struct {
	client    *kubeapi.Client
	namespace string
	selector  string
	cluster   string
	rules     memberRules
	log       *slog.Logger
	backoff   backoff.Exponential
	clock     clock.Clock
	watching  atomic.Bool
}

// NewSource checks cfg, reads the credentials it names and returns a
// Source. It sends nothing to the API server.
func NewSource(cfg SourceConfig) (*Source, error) {
	if cfg.Selector == "" && cfg.Cluster == "" {
		return nil, errors.New("kubernetes: SourceConfig: Selector or Cluster is required")
	}
	kc, err := kubeapi.Load(cfg.Kubeconfig, cfg.Context)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	return newSource(cfg, kc)
}

func newSource(cfg SourceConfig, kc *kubeapi.Config) (*Source, error) {
	client, err := kubeapi.NewClient(kc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	s := &Source{
		client:    client,
		namespace: cmpOr(cfg.Namespace, kc.Namespace, "default"),
		selector:  cfg.Selector,
		cluster:   cfg.Cluster,
		rules: memberRules{
			roleLabel: cfg.RoleLabel,
			zoneLabel: cmpOr(cfg.ZoneLabel, DefaultZoneLabel),
			portName:  cfg.PortName,
		},
		log:     cfg.Logger,
		backoff: cfg.backoff,
		clock:   cfg.clock,
	}
	if s.clock == nil {
		s.clock = clock.Real()
	}
	if s.selector == "" {
		s.selector = LabelCNPGCluster + "=" + cfg.Cluster + "," + LabelCNPGRole
	}
	return s, nil
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// String names what the Source watches.
func (s *Source) String() string {
	out := fmt.Sprintf("kubernetes.Source{Namespace: %q, Selector: %q", s.namespace, s.selector)
	if s.cluster != "" {
		out += fmt.Sprintf(", Cluster: %q", s.cluster)
	}
	return out + "}"
}

// warnEvery is the least time between two warnings of one kind.
const warnEvery = time.Minute

// Watch lists the selected pods, and the Cluster when one is named, then
// watches both, and calls update with the complete member list after the
// first lists and after each change of a member: only pods that are
// Ready, have an address and are not being deleted (and, while the
// Cluster's targetPrimary names another pod than its currentPrimary, that
// target once it has an address, Ready or not, without the current
// primary), each at its pod IP and PostgreSQL port, with the role its
// labels or the Cluster claim.
// While the API server cannot be reached it reports nothing, so the last
// topology stays in force; a list or watch that leaves no pod to report
// counts as no answer too. Watch returns nil once ctx ends, leaving no
// goroutine and no idle connection behind, or ErrWatching at once when
// another Watch of s is running.
//
// The Source sends the API server one watch request per collection and
// nothing more while the watches last; a watch the server ends is
// resumed from the last resourceVersion seen, and only a 410 Gone
// (the server no longer holds the events since then) lists again.
func (s *Source) Watch(ctx context.Context, update func(topology.Topology)) error {
	if !s.watching.CompareAndSwap(false, true) {
		return ErrWatching
	}
	defer s.watching.Store(false)
	defer s.client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	changes := make(chan func(*watch))
	send := func(f func(*watch)) {
		select {
		case changes <- f:
		case <-ctx.Done():
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before wg.Wait: the reflectors end with ctx
	follow := func(path string, q url.Values, h kubeapi.Handler) {
		wg.Go(func() {
			r := &kubeapi.Reflector{Client: s.client, Path: path, Query: q, Backoff: s.backoff, Clock: s.clock}
			r.Run(ctx, h)
		})
	}
	ns := url.PathEscape(s.namespace)
	follow("/api/v1/namespaces/"+ns+"/pods", url.Values{"labelSelector": {s.selector}}, kubeapi.Handler{
		Replace: func(items []json.RawMessage) { send(func(w *watch) { w.replacePods(items) }) },
		Apply:   func(ev kubeapi.Event) { send(func(w *watch) { w.applyPod(ev) }) },
		Failed:  func(err error) { send(func(w *watch) { w.failed("pods", err) }) },
	})
	w := &watch{Source: s, update: update, v: view{pods: map[string]*pod{}}, warnings: lograte.New(warnEvery, s.clock)}
	if s.cluster != "" {
		follow("/apis/postgresql.cnpg.io/v1/namespaces/"+ns+"/clusters",
			url.Values{"fieldSelector": {"metadata.name=" + s.cluster}}, kubeapi.Handler{
				Replace: func(items []json.RawMessage) { send(func(w *watch) { w.replaceCluster(items) }) },
				Apply:   func(ev kubeapi.Event) { send(func(w *watch) { w.applyCluster(ev) }) },
				Failed:  func(err error) { send(func(w *watch) { w.failed("cluster", err) }) },
			})
	} else {
		w.clusterKnown = true
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case f := <-changes:
			f(w)
			w.report(ctx)
		}
	}
}

// watch is the state of one Watch call; only its goroutine touches it.
type watch struct {
	*Source
	update func(topology.Topology)
	v      view
	// podsKnown and clusterKnown are set once the pods were listed, and
	// once the Cluster was listed (or could not be, or is not followed).
	podsKnown, clusterKnown bool
	last                    []topology.Member
	reported                bool
	// warnings lets one warning of each kind through each warnEvery.
	warnings *lograte.Limiter
	// failures counts the failed requests since the last good one.
	failures int
}

func (w *watch) replacePods(items []json.RawMessage) {
	w.healthy()
	w.podsKnown = true
	pods := make(map[string]*pod, len(items))
	for _, raw := range items {
		if p, err := decodePod(raw); err == nil && p.Metadata.Name != "" {
			pods[p.Metadata.Name] = p
		} else {
			w.warn("decode", "kubernetes: a pod of the list cannot be read; left out", slog.String("error", fmt.Sprint(err)))
		}
	}
	w.v.pods = pods
}

func (w *watch) applyPod(ev kubeapi.Event) {
	w.healthy()
	p, err := decodePod(ev.Object)
	if err != nil || p.Metadata.Name == "" {
		w.warn("decode", "kubernetes: a pod event cannot be read; ignored", slog.String("error", fmt.Sprint(err)))
		return
	}
	if ev.Type == "DELETED" {
		delete(w.v.pods, p.Metadata.Name)
		return
	}
	w.v.pods[p.Metadata.Name] = p
}

func (w *watch) replaceCluster(items []json.RawMessage) {
	w.healthy()
	w.clusterKnown = true
	w.v.cluster = nil
	for _, raw := range items {
		if c, err := decodeCluster(raw); err == nil && c.Metadata.Name == w.cluster {
			w.v.cluster = c
		}
	}
	if w.v.cluster == nil {
		w.warn("cluster", "kubernetes: the Cluster was not found; the pods' labels alone say who is primary",
			slog.String("cluster", w.cluster), slog.String("namespace", w.namespace))
	}
}

func (w *watch) applyCluster(ev kubeapi.Event) {
	w.healthy()
	c, err := decodeCluster(ev.Object)
	if err != nil {
		w.warn("decode", "kubernetes: a Cluster event cannot be read; ignored", slog.String("error", err.Error()))
		return
	}
	if c.Metadata.Name != w.cluster {
		return
	}
	if ev.Type == "DELETED" {
		w.v.cluster = nil
		return
	}
	w.v.cluster = c
}

// failed records a failed list or watch of what ("pods" or "cluster").
// A Cluster that cannot be read (no such resource, or the role may not
// read it) does not hold back the pods.
func (w *watch) failed(what string, err error) {
	w.failures++
	if what == "cluster" {
		w.clusterKnown = true
	}
	w.warn("down:"+what, "kubernetes: cannot list or watch the "+what+"; keeping the last topology",
		slog.String("error", err.Error()), slog.Int("failures", w.failures))
}

// healthy ends a run of failures, saying so once.
func (w *watch) healthy() {
	if w.failures == 0 {
		return
	}
	w.logAttrs(slog.LevelInfo, "kubernetes: the API server answers again", slog.Int("failures", w.failures))
	w.failures = 0
	w.warnings.Forget("down:pods")
	w.warnings.Forget("down:cluster")
}

// report calls update when the members changed.
func (w *watch) report(ctx context.Context) {
	if !w.podsKnown || !w.clusterKnown {
		return
	}
	members, notes := w.v.members(w.rules)
	if len(notes) > 0 {
		w.warn("skipped", "kubernetes: pods left out", slog.String("issues", strings.Join(notes[:min(5, len(notes))], "; ")))
	}
	if len(members) == 0 {
		if w.reported {
			w.warn("empty", "kubernetes: no selected pod is ready; keeping the last topology",
				slog.String("selector", w.selector), slog.String("namespace", w.namespace))
		}
		return // an empty topology would drop every host
	}
	if w.reported && slices.EqualFunc(members, w.last, sameMember) {
		return
	}
	if ctx.Err() != nil {
		return
	}
	w.last, w.reported = members, true
	w.update(topology.Topology{Members: slices.Clone(members)})
}

// warn logs a warning of kind, at most once each warnEvery; the line
// that passes says how many were held back before it.
func (w *watch) warn(kind, msg string, attrs ...slog.Attr) {
	if w.log == nil {
		return
	}
	ok, suppressed := w.warnings.Allow(kind)
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed))
	}
	w.logAttrs(slog.LevelWarn, msg, attrs...)
}

func (w *watch) logAttrs(level slog.Level, msg string, attrs ...slog.Attr) {
	if w.log != nil {
		w.log.LogAttrs(context.Background(), level, msg, attrs...)
	}
}

// sameMember compares two members field by field, tags included.
func sameMember(a, b topology.Member) bool {
	return a.Host == b.Host && a.Port == b.Port && a.Zone == b.Zone && a.Role == b.Role &&
		a.NoLoadBalance == b.NoLoadBalance && a.ReadLast == b.ReadLast && maps.Equal(a.Tags, b.Tags)
}
