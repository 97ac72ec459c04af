package pgtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultPassword is the superuser password when Options.Password is empty.
const DefaultPassword = "pgtest-secret"

// Options configures a cluster. The zero value is one primary, no replicas.
type Options struct {
	// Replicas is the number of streaming replicas next to the primary.
	Replicas int
	// SyncReplication makes the primary wait, before it acknowledges a
	// commit, for one of the standbys that follow it (synchronous_commit
	// = on, synchronous_standby_names = 'ANY 1 (node1, node2)'), as a
	// failover manager keeps it: the drills that promote a standby give
	// it the standbys that will follow it, none (so that it keeps taking
	// commits) when no standby is left, and Rejoin adds a node back once
	// it streams. See syncrep.go. It needs Replicas >= 1.
	SyncReplication bool
	// Settings are extra server settings for every server, written to the
	// configuration file (so ALTER SYSTEM can still override them).
	Settings map[string]string
	// Password is the password of the superuser "postgres" for TCP
	// connections (scram-sha-256). Empty means DefaultPassword.
	Password string
	// Zones optionally gives node i the setting pgfailover.zone = Zones[i].
	// It may be shorter than the number of nodes, not longer.
	Zones []string
	// BinDir overrides where the PostgreSQL programs are looked for.
	BinDir string
	// TLS makes every server accept TLS connections (ssl = on) with a
	// certificate for "localhost" and 127.0.0.1 signed by a certificate
	// authority made for the cluster alone; Cluster.RootCAs trusts it.
	// Connections without TLS are still accepted.
	TLS bool
}

// Cluster is a running primary with its streaming replicas on loopback.
// Its methods are safe for concurrent use, except that the topology changes
// (Promote, Repoint, Rejoin, Switchover, Failover, Node.Start/Stop) must not
// run concurrently with each other for the same nodes.
type Cluster struct {
	opts  Options
	bins  *binaries
	base  string
	nodes []*Node
	tls   *serverTLS // nil unless opts.TLS

	// mu guards primary and the nodes' follows and syncNames. No I/O
	// while held.
	mu      sync.Mutex
	primary *Node

	closeOnce sync.Once
	closeErr  error
}

// Start is New for tests: it fails the test at once if the cluster cannot
// be started and closes the cluster when the test ends. When the test has
// failed, the tail of every server log is written to the test log.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.nodes {
				t.Logf("--- tail of %s log (%s) ---\n%s", n.name, n.logPath, n.LogTail(4000))
			}
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// New starts a primary and opts.Replicas streaming replicas and returns once
// every replica streams from the primary (and, with SyncReplication, once
// the primary has a synchronous standby). On error nothing is left running.
// Call Close when done.
func New(ctx context.Context, opts Options) (*Cluster, error) {
	if err := normalize(&opts); err != nil {
		return nil, err
	}
	bins, err := cachedBinaries(ctx, opts.BinDir)
	if err != nil {
		return nil, err
	}
	tmpl, err := templateFor(ctx, bins)
	if err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp(os.TempDir(), fmt.Sprintf("%s%d-", dirPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	// Server processes are recognised by their working directory, which the
	// kernel reports with symbolic links resolved.
	if real, err := filepath.EvalSymlinks(base); err == nil {
		base = real
	}
	c := &Cluster{opts: opts, bins: bins, base: base}
	if opts.TLS {
		if c.tls, err = newServerTLS(); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("pgtest: making the TLS certificates: %w", err)
		}
	}
	if err := c.setup(ctx, tmpl); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

func normalize(o *Options) error {
	if o.Password == "" {
		o.Password = DefaultPassword
	}
	if o.Replicas < 0 {
		return fmt.Errorf("pgtest: Replicas = %d, want >= 0", o.Replicas)
	}
	if o.SyncReplication && o.Replicas == 0 {
		return errors.New("pgtest: SyncReplication needs at least one replica (writes would wait forever)")
	}
	if len(o.Zones) > o.Replicas+1 {
		return fmt.Errorf("pgtest: %d zones for %d nodes", len(o.Zones), o.Replicas+1)
	}
	for k, v := range o.Settings {
		if !validSettingName(k) {
			return fmt.Errorf("pgtest: invalid setting name %q", k)
		}
		switch strings.ToLower(k) {
		case "port", "listen_addresses", "unix_socket_directories":
			return fmt.Errorf("pgtest: setting %s is managed by the harness", k)
		}
		if strings.ContainsAny(v, "\n\r\x00") {
			return fmt.Errorf("pgtest: setting %s: value holds a line break", k)
		}
	}
	for _, z := range o.Zones {
		if strings.ContainsAny(z, "\n\r\x00") {
			return fmt.Errorf("pgtest: zone %q holds a line break", z)
		}
	}
	if strings.ContainsRune(o.Password, 0) {
		return errors.New("pgtest: password holds a NUL byte")
	}
	// Copy the caller's map and slice: the cluster keeps its own.
	s := make(map[string]string, len(o.Settings))
	for k, v := range o.Settings {
		s[k] = v
	}
	o.Settings = s
	o.Zones = append([]string(nil), o.Zones...)
	return nil
}

func (c *Cluster) setup(ctx context.Context, tmpl *template) error {
	if err := os.Chmod(c.base, 0o755); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	for i := 0; i <= c.opts.Replicas; i++ {
		n, err := c.newNode(i)
		if err != nil {
			return err
		}
		c.nodes = append(c.nodes, n)
	}

	// The primary: a copy of the template. Its synchronous standbys are
	// the replicas to come.
	p := c.nodes[0]
	for _, r := range c.nodes[1:] {
		c.setFollows(r, p)
	}
	if err := tmpl.writeTo(c.bins, p.dataDir); err != nil {
		return fmt.Errorf("pgtest: %s: copy template: %w", p.name, err)
	}
	if err := p.writeConf(); err != nil {
		return err
	}
	if err := p.startNew(ctx); err != nil {
		return err
	}
	if err := c.setPassword(ctx, p); err != nil {
		return err
	}
	c.primary = p

	// The replicas: base backups of the primary, taken in parallel.
	replicas := c.nodes[1:]
	errs := make([]error, len(replicas))
	var wg sync.WaitGroup
	for i, r := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.addReplica(ctx, r, p)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if c.opts.SyncReplication {
		if err := c.waitSyncStandby(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// newNode prepares the directories of node i and reserves its port.
func (c *Cluster) newNode(i int) (*Node, error) {
	name := "node" + strconv.Itoa(i)
	dir := filepath.Join(c.base, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	n := &Node{
		c:       c,
		name:    name,
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		sockDir: filepath.Join(dir, "sock"),
		logPath: filepath.Join(dir, "postgres.log"),
	}
	if i < len(c.opts.Zones) {
		n.zone = c.opts.Zones[i]
	}
	// A Unix socket path is limited to 107 bytes on Linux.
	if len(n.sockDir)+len("/.s.PGSQL.65535") > 100 {
		s, err := os.MkdirTemp("/tmp", fmt.Sprintf("%s%d-s", dirPrefix, os.Getpid()))
		if err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
		if err := os.Chmod(s, 0o755); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
		n.sockDir = filepath.Join(s, "s")
		n.shortSock = s
	}
	if err := c.bins.mkdirOwned(n.sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	port, err := reservePort()
	if err != nil {
		return nil, err
	}
	n.port = port
	return n, nil
}

// startNew starts a node for the first time. If another process took its
// port meanwhile, the node moves to a new port and tries again.
func (n *Node) startNew(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := n.start(ctx)
		if err == nil || attempt == 5 || !errors.Is(err, errPortBusy) {
			return err
		}
		port, perr := reservePort()
		if perr != nil {
			return errors.Join(err, perr)
		}
		releasePort(n.port)
		n.port = port
	}
}

// writeConf writes the node's pgtest.conf, included by postgresql.conf.
func (n *Node) writeConf() error {
	s := map[string]string{
		"listen_addresses":            "127.0.0.1",
		"unix_socket_directories":     n.sockDir,
		"max_connections":             "100",
		"shared_buffers":              "16MB",
		"fsync":                       "off",
		"full_page_writes":            "on",
		"wal_level":                   "replica",
		"hot_standby":                 "on",
		"wal_keep_size":               "64MB",
		"wal_retrieve_retry_interval": "200ms",
		"wal_log_hints":               "on",
		"logging_collector":           "off",
		"cluster_name":                n.name,
	}
	if n.c.opts.SyncReplication {
		names := n.c.syncStandbyNames(n)
		n.c.mu.Lock()
		n.syncNames = names
		n.c.mu.Unlock()
		s["synchronous_standby_names"] = names
		s["synchronous_commit"] = "on"
	}
	if n.zone != "" {
		s["pgfailover.zone"] = n.zone
	}
	if n.c.tls != nil {
		settings, err := n.c.tls.writeFiles(n.c.bins, n.dataDir)
		if err != nil {
			return err
		}
		maps.Copy(s, settings)
	}
	text := "# Written by pgtest for " + n.name + "; rewritten whenever the node is (re)created.\n" +
		renderConf(s)
	if len(n.c.opts.Settings) > 0 {
		text += "# Options.Settings\n" + renderConf(n.c.opts.Settings)
	}
	if err := n.c.bins.writeOwned(filepath.Join(n.dataDir, "pgtest.conf"), []byte(text)); err != nil {
		return fmt.Errorf("pgtest: %s: %w", n.name, err)
	}
	return nil
}

// primaryConnInfo is what a standby of p uses to stream from it. Replication
// connections from 127.0.0.1 are trusted, so it holds no password.
func (n *Node) primaryConnInfo(p *Node) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", p.port, n.name)
}

// configureStandby makes the stopped node n a standby of p.
func (n *Node) configureStandby(p *Node) error {
	n.c.setFollows(n, p)
	if err := n.writeConf(); err != nil {
		return err
	}
	if err := n.c.bins.writeOwned(filepath.Join(n.dataDir, "standby.signal"), nil); err != nil {
		return fmt.Errorf("pgtest: %s: %w", n.name, err)
	}
	err := setAutoConf(n.c.bins, n.dataDir, map[string]string{
		"primary_conninfo":         n.primaryConnInfo(p),
		"recovery_target_timeline": "latest",
		"primary_slot_name":        "",
	})
	if err != nil {
		return fmt.Errorf("pgtest: %s: %w", n.name, err)
	}
	return nil
}

func (c *Cluster) addReplica(ctx context.Context, r, p *Node) error {
	if err := c.clone(ctx, r, p); err != nil {
		return err
	}
	if err := r.configureStandby(p); err != nil {
		return err
	}
	if err := r.startNew(ctx); err != nil {
		return err
	}
	return c.waitStreaming(ctx, r, p)
}

// Close stops every server (immediate shutdown, escalating to SIGKILL),
// waits for all their processes and removes the cluster's directories. It
// is safe to call more than once; later calls return the first result.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for _, n := range c.nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = n.Stop(ctx, Immediate) // escalates to SIGKILL on timeout
			}()
		}
		wg.Wait()
		var errs []error
		for _, n := range c.nodes {
			releasePort(n.port)
			if n.shortSock != "" {
				if err := os.RemoveAll(n.shortSock); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if err := os.RemoveAll(c.base); err != nil {
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			c.closeErr = fmt.Errorf("pgtest: close: %w", err)
		}
	})
	return c.closeErr
}

// Nodes returns the nodes in creation order; node 0 was the first primary.
func (c *Cluster) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// Primary returns the node the cluster currently regards as primary. It
// changes only through Promote, Switchover and Failover.
func (c *Cluster) Primary() *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.primary
}

func (c *Cluster) setPrimary(n *Node) {
	c.mu.Lock()
	c.primary = n
	c.mu.Unlock()
}

// Replicas returns the nodes other than the current primary, in node order.
func (c *Cluster) Replicas() []*Node {
	p := c.Primary()
	var rs []*Node
	for _, n := range c.nodes {
		if n != p {
			rs = append(rs, n)
		}
	}
	return rs
}

// Password returns the superuser's password.
func (c *Cluster) Password() string { return c.opts.Password }

// ConnString returns a multi-host URL over all nodes in node order:
// postgres://postgres:<pw>@127.0.0.1:p0,127.0.0.1:p1,.../postgres?sslmode=disable
// with params (like "target_session_attrs=read-write") appended when not
// empty.
func (c *Cluster) ConnString(params string) string {
	hosts := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		hosts[i] = n.Addr()
	}
	return connURL(c.opts.Password, hosts, params)
}

// ConnStringFor is ConnString over the given nodes only, in the given
// order, so that a test can list a replica before the primary.
func (c *Cluster) ConnStringFor(nodes []*Node, params string) string {
	hosts := make([]string, len(nodes))
	for i, n := range nodes {
		hosts[i] = n.Addr()
	}
	return connURL(c.opts.Password, hosts, params)
}

// ConnStringAt is ConnString over the given addresses (host:port) instead
// of the nodes' own, for a client that reaches the servers through
// something in between, such as a proxy per server.
func (c *Cluster) ConnStringAt(addrs []string, params string) string {
	return connURL(c.opts.Password, addrs, params)
}
