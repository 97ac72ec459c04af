package kubetest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgfailover/pgfailover/failover/failovertest"
	"github.com/pgfailover/pgfailover/kubernetes"
)

// Operator says whose labels and objects the harness writes.
type Operator int

const (
	// CloudNativePG labels pods cnpg.io/cluster and cnpg.io/instanceRole
	// and keeps a Cluster whose status.targetPrimary announces each
	// switchover and failover.
	CloudNativePG Operator = iota
	// Spilo labels pods application=spilo, cluster-name and spilo-role
	// (master or replica), as Patroni on Kubernetes does.
	Spilo
	// Crunchy labels pods postgres-operator.crunchydata.com/cluster and
	// .../role (master or replica), as Crunchy PGO does.
	Crunchy
)

func (o Operator) String() string {
	switch o {
	case CloudNativePG:
		return "CloudNativePG"
	case Spilo:
		return "Spilo"
	case Crunchy:
		return "Crunchy"
	}
	return "Operator(" + strconv.Itoa(int(o)) + ")"
}

// Option configures Start.
type Option func(*options)

type options struct {
	op   Operator
	api  *APIServer
	pg   []failovertest.Option
	name string
	lead time.Duration
}

// WithOperator picks the operator the harness plays; CloudNativePG by
// default.
func WithOperator(op Operator) Option { return func(o *options) { o.op = op } }

// OnAPIServer puts the cluster on an API server the test already runs
// (in a namespace of its own) instead of starting one.
func OnAPIServer(a *APIServer) Option { return func(o *options) { o.api = a } }

// PostgreSQL passes options to failovertest.Start: Replicas(2), say.
func PostgreSQL(opts ...failovertest.Option) Option {
	return func(o *options) { o.pg = append(o.pg, opts...) }
}

// AnnouncementLead is how long CloudNativePG's Switchover lets pass
// between writing targetPrimary and stopping the primary: the time its
// instance manager takes to see the write and act; 200ms by default.
// Calls sent to the old primary in that time are what the announcement
// lets a Pool avoid.
func AnnouncementLead(d time.Duration) Option { return func(o *options) { o.lead = d } }

// Named names the cluster (and its namespace); "pg" by default.
func Named(name string) Option { return func(o *options) { o.name = name } }

// Cluster is a PostgreSQL cluster as an operator runs it on Kubernetes:
// a failovertest.Cluster whose every node is a pod, stored in an API
// server, at an address of its own on loopback (127.0.47.N:5432, where
// the harness forwards connections to the node), with the operator's
// labels, readiness and, for CloudNativePG, a Cluster object. The
// operator's moves are one call each and write what the operator writes,
// in its order.
//
// Its methods are safe for concurrent use, one move at a time.
type Cluster struct {
	API       *APIServer
	PG        *failovertest.Cluster
	Namespace string
	Name      string
	Operator  Operator

	lead time.Duration // see AnnouncementLead
	move sync.Mutex    // held by each move

	mu   sync.Mutex // guards pods; no I/O while held
	pods map[*failovertest.Node]*podState
}

type podState struct {
	name string
	ip   string
	fwd  *forwarder
}

// Start starts a cluster for the test: an API server (unless OnAPIServer
// names one), a failovertest cluster (a primary and one replica unless
// PostgreSQL says otherwise), and a ready pod for each node. Everything
// stops when the test ends.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	o := options{name: "pg", lead: 200 * time.Millisecond}
	for _, opt := range opts {
		opt(&o)
	}
	if o.api == nil {
		o.api = StartAPIServer(t)
	}
	pg := failovertest.Start(t, o.pg...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := &Cluster{API: o.api, PG: pg, Namespace: o.name, Name: o.name, Operator: o.op, lead: o.lead, pods: map[*failovertest.Node]*podState{}}
	t.Cleanup(c.close)
	if err := c.start(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *Cluster) start(ctx context.Context) error {
	if err := c.API.CreateNamespace(ctx, c.Namespace); err != nil {
		return err
	}
	primary := c.PG.Primary()
	for i, n := range c.PG.Nodes() {
		name := c.Name + "-" + strconv.Itoa(i+1)
		if err := c.API.CreatePod(ctx, c.Namespace, Pod{Name: name, Labels: c.labels(n == primary)}); err != nil {
			return err
		}
		if err := c.place(ctx, n, name, ""); err != nil {
			return err
		}
	}
	if c.Operator == CloudNativePG {
		if err := c.API.CreateCluster(ctx, c.Namespace, c.Name); err != nil {
			return err
		}
		p := c.Pod(primary)
		return c.API.SetClusterStatus(ctx, c.Namespace, c.Name, p, p)
	}
	return nil
}

// place gives the pod name of node n an address of its own (not avoid), forwards it
// to n and marks the pod ready there.
func (c *Cluster) place(ctx context.Context, n *failovertest.Node, name, avoid string) error {
	var fwd *forwarder
	var ip string
	for i := 2; i < 255 && fwd == nil; i++ {
		ip = "127.0.47." + strconv.Itoa(i)
		if ip != avoid {
			fwd, _ = listen(net.JoinHostPort(ip, "5432"), n.Addr())
		}
	}
	if fwd == nil {
		return fmt.Errorf("kubetest: no free address in 127.0.47.0/24 on port 5432 for pod %s", name)
	}
	c.mu.Lock()
	c.pods[n] = &podState{name: name, ip: ip, fwd: fwd}
	c.mu.Unlock()
	return c.API.SetPodStatus(ctx, c.Namespace, name, ip, true)
}

func (c *Cluster) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pods {
		p.fwd.close()
	}
}

// labels returns the labels the operator puts on a pod of the cluster.
func (c *Cluster) labels(primary bool) map[string]string {
	switch c.Operator {
	case Spilo:
		return map[string]string{"application": "spilo", "cluster-name": c.Name, kubernetes.LabelSpiloRole: role(primary, "master")}
	case Crunchy:
		return map[string]string{"postgres-operator.crunchydata.com/cluster": c.Name, kubernetes.LabelCrunchyRole: role(primary, "master")}
	}
	return map[string]string{kubernetes.LabelCNPGCluster: c.Name, kubernetes.LabelCNPGRole: role(primary, "primary"), "cnpg.io/podRole": "instance"}
}

func role(primary bool, word string) string {
	if primary {
		return word
	}
	return "replica"
}

// Pod returns the name of n's pod.
func (c *Cluster) Pod(n *failovertest.Node) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods[n].name
}

// PodAddr returns the address clients reach n's pod at, ip:5432.
func (c *Cluster) PodAddr(n *failovertest.Node) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return net.JoinHostPort(c.pods[n].ip, "5432")
}

// Node returns the node whose pod is at addr (ip:5432), nil if none.
func (c *Cluster) Node(addr string) *failovertest.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, p := range c.pods {
		if net.JoinHostPort(p.ip, "5432") == addr {
			return n
		}
	}
	return nil
}

// SourceConfig returns a kubernetes.SourceConfig that finds the cluster's
// pods as the SourceUser would, through a kubeconfig file of its own.
func (c *Cluster) SourceConfig() (kubernetes.SourceConfig, error) {
	kc, err := c.API.Kubeconfig(c.Namespace)
	if err != nil {
		return kubernetes.SourceConfig{}, err
	}
	cfg := kubernetes.SourceConfig{Namespace: c.Namespace, Kubeconfig: kc, Selector: c.selector()}
	if c.Operator == CloudNativePG {
		cfg.Cluster, cfg.Selector = c.Name, ""
	}
	return cfg, nil
}

func (c *Cluster) selector() string {
	switch c.Operator {
	case Spilo:
		return "application=spilo,cluster-name=" + c.Name
	case Crunchy:
		return "postgres-operator.crunchydata.com/cluster=" + c.Name
	}
	return kubernetes.LabelCNPGCluster + "=" + c.Name
}

// ConnString returns a connection string for kubernetes.New: the
// superuser's credentials, no host, and the kubernetes_* keys that find
// the pods; params (like "pool_max_conns=4") are appended when not empty.
func (c *Cluster) ConnString(params string) (string, error) {
	kc, err := c.API.Kubeconfig(c.Namespace)
	if err != nil {
		return "", err
	}
	q := url.Values{}
	q.Set("sslmode", "disable")
	q.Set(kubernetes.KeyNamespace, c.Namespace)
	q.Set(kubernetes.KeyKubeconfig, kc)
	if c.Operator == CloudNativePG {
		q.Set(kubernetes.KeyCluster, c.Name)
	} else {
		q.Set(kubernetes.KeySelector, c.selector())
	}
	s := "postgres://postgres:" + url.QueryEscape(c.PG.Password()) + "@/postgres?" + q.Encode()
	if params != "" {
		s += "&" + params
	}
	return s, nil
}

// waitWritable reports, on the returned channel, when n first answers
// that it is not in recovery: the moment a promotion lets writes in. It
// polls n over one connection until then or until ctx ends (then the
// channel gets the zero time).
func waitWritable(ctx context.Context, n *failovertest.Node) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		var at time.Time
		defer func() { out <- at }()
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				_ = conn.Close(context.Background())
			}
		}()
		for ctx.Err() == nil {
			if conn == nil {
				conn, _ = n.Connect(ctx)
			}
			if conn != nil {
				var rec bool
				if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&rec); err != nil {
					_ = conn.Close(context.Background())
					conn = nil
				} else if !rec {
					at = time.Now()
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return out
}
