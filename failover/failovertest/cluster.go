package failovertest

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/internal/pgtest"
)

// BinDirEnv names the environment variable that points the harness at a
// directory holding the PostgreSQL server programs (postgres and initdb;
// pg_basebackup and pg_rewind are used when they are there). When it is
// set, the harness looks there only and installs nothing.
const BinDirEnv = pgtest.BinDirEnv

// ErrNoBinaries is wrapped by the error of New (and the failure of Start)
// when the PostgreSQL server programs cannot be found or installed. The
// error's text ends with the command that installs them on this system.
var ErrNoBinaries = pgtest.ErrNoBinaries

// InstallEnv names the environment variable that keeps the harness from
// installing anything: with PGTEST_INSTALL=0 (or false, no, off), servers
// that are missing are an error wrapping ErrNoBinaries or ErrNoPatroni
// whose text ends with the command that installs them, as where the
// harness cannot install. Any value other than a yes (1, true, yes, on) or
// a no counts as 0.
const InstallEnv = pgtest.InstallEnv

// SkipUnavailableEnv names the environment variable that does for every
// Start and StartPatroni of the test binary what SkipUnavailable does for
// one: PGTEST_SKIP_UNAVAILABLE=1 (or true, yes, on). A CI job that must run
// the tests leaves it unset.
const SkipUnavailableEnv = "PGTEST_SKIP_UNAVAILABLE"

// startTimeout bounds Start. The first cluster of a process may install
// the server programs (about 30 s) and runs initdb once.
const startTimeout = 2 * time.Minute

// An Option configures the cluster Start or New makes.
type Option func(*options)

// options is what the Options say, on top of pgtest's.
type options struct {
	pg      pgtest.Options
	proxies bool
	skip    bool // SkipUnavailable
}

func newOptions(opts []Option) options {
	o := options{pg: pgtest.Options{Replicas: 1}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Replicas sets the number of streaming replicas next to the primary. The
// default is one; zero gives a lone primary.
func Replicas(n int) Option { return func(o *options) { o.pg.Replicas = n } }

// SyncReplication makes the primary wait, before it acknowledges a commit,
// until one of the standbys that follow it has the commit
// (synchronous_commit = on, synchronous_standby_names = 'ANY 1 (node1,
// node2)'), so that promoting the standby that received the most WAL loses
// no acknowledged write. It needs at least one replica.
//
// The harness keeps the list itself, as a failover manager would:
// Failover, Promote and Switchover give the new primary the standbys that
// follow it as its synchronous standbys, from the moment it leaves
// recovery; when none is left (Replicas(1) after a Failover), its list is
// empty and it takes commits without waiting, as a Patroni leader in
// synchronous_mode (not strict) does, and a second failover before a
// standby is back would lose them. Rejoin, and Switchover for
// the old primary, add a node back once it streams, and commits wait for a
// standby again. A standby that is down (Node.Crash, Node.Stop) stays on
// the list: with no other, commits wait until it is back. Standbys have an
// empty list. Setting("synchronous_standby_names", ...) or ALTER SYSTEM
// override all of this.
func SyncReplication() Option { return func(o *options) { o.pg.SyncReplication = true } }

// Zones gives node i the server setting pgfailover.zone = zones[i], which
// the Pool reads to prefer replicas in its own zone. There may be fewer
// zones than nodes, not more.
func Zones(zones ...string) Option {
	return func(o *options) { o.pg.Zones = append([]string(nil), zones...) }
}

// TLS makes every server accept TLS connections with a certificate for
// "localhost" and 127.0.0.1, signed by a certificate authority made for the
// cluster alone (Cluster.RootCAs). ConnString then asks for
// sslmode=require; connections without TLS are still accepted.
func TLS() Option { return func(o *options) { o.pg.TLS = true } }

// Setting sets a server setting on every server, as postgresql.conf would
// (ALTER SYSTEM still overrides it). The harness manages port,
// listen_addresses and unix_socket_directories, which cannot be set.
func Setting(name, value string) Option {
	return func(o *options) {
		if o.pg.Settings == nil {
			o.pg.Settings = map[string]string{}
		}
		o.pg.Settings[name] = value
	}
}

// SkipUnavailable makes Start and StartPatroni skip the test, with the
// reason, when the servers cannot be had: the PostgreSQL programs (or, for
// StartPatroni, patroni, patronictl or etcd) are not there and cannot be
// installed here, or $PGTEST_INSTALL=0 forbids it (errors wrapping
// ErrNoBinaries or ErrNoPatroni). Any other failure to start still fails
// the test. Without it, and without $PGTEST_SKIP_UNAVAILABLE
// (SkipUnavailableEnv), such a test fails, which is what a CI job that has
// the servers wants. New and NewPatroni return the error either way.
func SkipUnavailable() Option { return func(o *options) { o.skip = true } }

// Password sets the password of the superuser "postgres" for TCP
// connections (scram-sha-256). The default is DefaultPassword.
func Password(password string) Option { return func(o *options) { o.pg.Password = password } }

// DefaultPassword is the superuser's password unless Password says
// otherwise.
const DefaultPassword = pgtest.DefaultPassword

// Cluster is a throwaway PostgreSQL cluster on loopback: a primary and
// its streaming replicas, each a child process of the test, with the
// faults of a failover one call away.
//
// The harness decides who is primary: the first node, until a fault
// (Failover, Promote, Switchover) makes another one primary. Primary
// returns that node even while it is down. Standbys stream from the
// primary directly and follow a new one after each promotion.
//
// Its methods are safe for concurrent use. Faults that change who is
// primary or stop and start servers take turns; Freeze, Thaw, replay and
// network faults do not wait for them.
type Cluster struct {
	pc    *pgtest.Cluster
	opts  options
	nodes []*Node
	by    map[*pgtest.Node]*Node

	// drill makes the faults that stop, start or promote servers take
	// turns. It is held across their I/O, and nothing else is guarded by
	// it.
	drill sync.Mutex

	epMu      sync.Mutex // guards endpoints and epClosed
	endpoints map[*Endpoint]struct{}
	epClosed  bool

	closeOnce sync.Once
	closeErr  error
}

// Start starts a cluster for the test t and stops it when the test ends
// (t.Cleanup). It fails the test at once when the cluster cannot start,
// unless the servers cannot be had and SkipUnavailable or
// $PGTEST_SKIP_UNAVAILABLE says to skip. The default is one primary and
// one replica.
//
// When the test has failed, the end of every server's log is written to
// the test log; Node.LogTail reads it at any time.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	o := newOptions(opts)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	pc, err := pgtest.New(ctx, o.pg)
	if err != nil {
		failStart(t, o, err)
	}
	c, err := wrap(pc, o)
	if err != nil {
		t.Fatal(errors.Join(err, pc.Close()))
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.nodes {
				t.Logf("--- tail of %s's log ---\n%s", n.Name(), n.LogTail(4000))
			}
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// New starts a cluster for a program rather than a test: it returns once
// every replica streams from the primary (and, with SyncReplication, the
// primary has a synchronous standby). Call Close when done. On error,
// nothing is left running; when the server programs cannot be had, the
// error wraps ErrNoBinaries and ends with the command that installs them.
func New(ctx context.Context, opts ...Option) (*Cluster, error) {
	o := newOptions(opts)
	pc, err := pgtest.New(ctx, o.pg)
	if err != nil {
		return nil, err
	}
	c, err := wrap(pc, o)
	if err != nil {
		return nil, errors.Join(err, pc.Close())
	}
	return c, nil
}

// failStart ends the test t whose cluster could not start: it skips when
// the servers cannot be had and the test or its environment chose to
// skip then, and fails it otherwise.
func failStart(t testing.TB, o options, err error) {
	t.Helper()
	if errors.Is(err, ErrNoBinaries) || errors.Is(err, pgtest.ErrNoPatroni) {
		skip, envErr := skipUnavailable(o)
		if envErr != nil {
			t.Fatal(errors.Join(err, envErr))
		}
		if skip {
			t.Skipf("failovertest: skipped, the servers cannot be had: %v", err)
		}
	}
	t.Fatal(err)
}

// skipUnavailable reports whether a test that cannot have its servers is
// skipped: SkipUnavailable, or $PGTEST_SKIP_UNAVAILABLE. A value of the
// variable that is neither a yes nor a no is an error, not a guess.
func skipUnavailable(o options) (bool, error) {
	if o.skip {
		return true, nil
	}
	v := os.Getenv(SkipUnavailableEnv)
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false", "no", "off":
		return false, nil
	case "1", "true", "yes", "on":
		return true, nil
	}
	return false, fmt.Errorf("failovertest: %s=%q is not a yes (1, true, yes, on) or a no", SkipUnavailableEnv, v)
}

func wrap(pc *pgtest.Cluster, o options) (*Cluster, error) {
	c := &Cluster{pc: pc, opts: o, by: map[*pgtest.Node]*Node{}}
	for _, pn := range pc.Nodes() {
		n := &Node{c: c, pn: pn}
		c.nodes = append(c.nodes, n)
		c.by[pn] = n
	}
	if o.proxies {
		if err := c.startProxies(); err != nil {
			c.closeProxies()
			return nil, err
		}
	}
	return c, nil
}

// Close closes the cluster's endpoints, stops every server and removes
// the cluster's files. Start's cleanup calls it; programs call it
// themselves. It is safe to call more than once.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.closeEndpoints()
		c.closeProxies()
		c.closeErr = c.pc.Close()
	})
	return c.closeErr
}

// Nodes returns every node in creation order; node 0 was the first
// primary.
func (c *Cluster) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// Primary returns the node the harness last made primary. After
// CrashPrimary it is the crashed node, down, until a promotion.
func (c *Cluster) Primary() *Node { return c.by[c.pc.Primary()] }

// Replicas returns every node but the primary, in node order, running or
// not.
func (c *Cluster) Replicas() []*Node {
	var rs []*Node
	for _, pn := range c.pc.Replicas() {
		rs = append(rs, c.by[pn])
	}
	return rs
}

// ConnString returns a multi-host connection string over every node's
// Addr, in node order, as the superuser "postgres" with the cluster's
// password, for failover.New:
//
//	postgres://postgres:<password>@127.0.0.1:p0,127.0.0.1:p1/postgres?sslmode=disable
//
// params (like "pool_max_conns=4") are appended when not empty; a key in
// params wins over the same key before it. With TLS, sslmode is require.
func (c *Cluster) ConnString(params string) string {
	return c.ConnStringFor(c.nodes, params)
}

// ConnStringFor is ConnString over the given nodes only, in the given
// order: a connection string that lists a standby before the primary, or
// leaves a node out.
func (c *Cluster) ConnStringFor(nodes []*Node, params string) string {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	return c.pc.ConnStringAt(addrs, c.params(params))
}

// params puts the cluster's own parameters before the caller's.
func (c *Cluster) params(params string) string {
	if !c.opts.pg.TLS {
		return params
	}
	if params == "" {
		return "sslmode=require"
	}
	return "sslmode=require&" + params
}

// Password returns the superuser's password.
func (c *Cluster) Password() string { return c.pc.Password() }

// RootCAs returns the certificate authority that signed the servers'
// certificate, for a tls.Config that verifies them (sslmode=verify-full),
// or nil without the TLS option.
func (c *Cluster) RootCAs() *x509.CertPool { return c.pc.RootCAs() }

// WaitReplicated waits until every running standby has replayed what the
// primary had written when it was called. A standby whose replay is paused
// holds it until ctx ends.
func (c *Cluster) WaitReplicated(ctx context.Context) error {
	return c.pc.WaitReplicated(ctx)
}

func (c *Cluster) node(n *Node) (*pgtest.Node, error) {
	if n == nil || n.c != c {
		return nil, fmt.Errorf("failovertest: %v is not a node of this cluster", n)
	}
	return n.pn, nil
}
