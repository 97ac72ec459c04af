package failovertest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/pgfailover/pgfailover/internal/faultproxy"
)

// Endpoint is a TCP address on 127.0.0.1 in front of the cluster that
// leads to one node at a time, as a cloud provider's writer endpoint, a
// Kubernetes Service or HAProxy does, or spreads new connections over
// several nodes, as a reader endpoint does. Each new connection goes to
// the node the endpoint leads to when it is accepted; an open connection
// stays on the server it reached until the server or Cut ends it. An
// endpoint from Cluster.Endpoint follows no failover by itself: the test
// moves it with MoveTo. One from Cluster.PrimaryEndpoint or
// Cluster.ReplicaEndpoint follows the cluster's drills, some time after
// each.
//
// Its methods are safe for concurrent use.
type Endpoint struct {
	c *Cluster
	p *faultproxy.Proxy

	// follow returns the nodes the endpoint leads to after a drill; it is
	// nil for an endpoint that only MoveTo moves. lag is how long after
	// the drill it gets there.
	follow func() []*Node
	lag    time.Duration

	mu sync.Mutex // guards the fields below
	// want is where the latest drill sent the endpoint, now or when timer
	// fires.
	want   []*Node
	timer  *time.Timer // the pending move, or nil
	closed bool
}

// Endpoint starts an endpoint in front of the given nodes: with one node,
// a writer-style endpoint that leads every new connection to it; with
// several, a reader-style endpoint that leads each new connection to the
// next of them in turn, in the order given. The endpoint dials each node's
// Addr, so with the Proxies option the node's network faults reach the
// connections through the endpoint too. The cluster closes the endpoint in
// Close; Endpoint.Close closes it sooner.
func (c *Cluster) Endpoint(to ...*Node) (*Endpoint, error) {
	if len(to) == 0 {
		return nil, errors.New("failovertest: an endpoint needs at least one node")
	}
	if _, err := c.addrsOf(to); err != nil {
		return nil, err
	}
	return c.newEndpoint(to, nil, 0)
}

// PrimaryEndpoint starts a writer endpoint that leads every new
// connection to the primary (the node Primary returns) and follows the
// drills of this Cluster that make another node primary: Failover,
// Promote and Switchover. lag after such a drill has promoted its node
// (the move is scheduled as the drill returns), new connections go to
// the new primary; until then they go to the old one, down or, after a
// Switchover, back as a standby, as through a name whose DNS TTL has not
// run out or a load balancer whose health check has not run yet. With
// lag 0 (or less) the endpoint moves before the drill returns.
// CrashPrimary names no new primary and does not move it.
//
// A drill while a move is pending replaces that move: the endpoint moves
// lag after the later drill, to the primary that drill left. MoveTo moves
// the endpoint by hand until the next move a drill schedules, or one
// already pending, takes effect. Close, and the cluster's Close, drop a
// pending move. PrimaryEndpoint waits for a drill under way to end. The
// cluster closes the endpoint in Close; Endpoint.Close closes it sooner.
func (c *Cluster) PrimaryEndpoint(lag time.Duration) (*Endpoint, error) {
	return c.followingEndpoint(func() []*Node { return []*Node{c.Primary()} }, lag)
}

// ReplicaEndpoint starts a reader endpoint that leads new connections in
// turn, in node order, to the replicas that run (the nodes Replicas
// returns, less those stopped or crashed), and follows the drills of
// this Cluster that change them: Failover, Promote, Switchover and
// Rejoin. lag after such a drill (the move is scheduled as the drill
// returns), new connections go in turn to the replicas that ran when it
// ended; until then they go to the earlier ones, one of which may now be
// the primary or down. After a Promote that leaves the old primary
// running, the old primary is among them. With no replica, new
// connections are accepted and closed at once, as MoveTo with no node
// does. A replica stopped or started with Node's methods changes the
// endpoint at the next drill only. Lag 0, pending moves, MoveTo, Close
// and waiting for a drill under way are as for PrimaryEndpoint.
func (c *Cluster) ReplicaEndpoint(lag time.Duration) (*Endpoint, error) {
	return c.followingEndpoint(c.runningReplicas, lag)
}

// runningReplicas returns the replicas that run, in node order.
func (c *Cluster) runningReplicas() []*Node {
	var rs []*Node
	for _, n := range c.Replicas() {
		if n.Running() {
			rs = append(rs, n)
		}
	}
	return rs
}

// followingEndpoint starts an endpoint that leads to follow's nodes now
// and after each drill. It holds the drill lock, so that no drill ends
// between the look at the cluster and the endpoint's registration.
func (c *Cluster) followingEndpoint(follow func() []*Node, lag time.Duration) (*Endpoint, error) {
	c.drill.Lock()
	defer c.drill.Unlock()
	return c.newEndpoint(follow(), follow, lag)
}

// newEndpoint starts an endpoint in front of the nodes to, which are
// nodes of c, and registers it for Close and, with follow, for the
// drills.
func (c *Cluster) newEndpoint(to []*Node, follow func() []*Node, lag time.Duration) (*Endpoint, error) {
	p, err := faultproxy.New("")
	if err != nil {
		return nil, fmt.Errorf("failovertest: starting an endpoint: %w", err)
	}
	p.SetUpstream(nodeAddrs(to)...)
	e := &Endpoint{c: c, p: p, follow: follow, lag: lag, want: to}
	c.epMu.Lock()
	if c.epClosed {
		c.epMu.Unlock()
		_ = p.Close()
		return nil, errors.New("failovertest: the cluster is closed")
	}
	if c.endpoints == nil {
		c.endpoints = map[*Endpoint]struct{}{}
	}
	c.endpoints[e] = struct{}{}
	c.epMu.Unlock()
	return e, nil
}

// drilled schedules the move of every endpoint that follows the drills.
// The drills call it as they end, with the drill lock held, whether or
// not they succeeded: each endpoint compares what it would lead to with
// where the latest drill sent it.
func (c *Cluster) drilled() {
	c.epMu.Lock()
	var eps []*Endpoint
	for e := range c.endpoints {
		if e.follow != nil {
			eps = append(eps, e)
		}
	}
	c.epMu.Unlock()
	for _, e := range eps {
		e.drilled()
	}
}

// drilled moves the endpoint, lag from now, to what follow returns, if
// that is not where the latest drill sent it, and drops a pending move.
func (e *Endpoint) drilled() {
	to := e.follow()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || slices.Equal(to, e.want) {
		return
	}
	e.want = to
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	addrs := nodeAddrs(to)
	if e.lag <= 0 {
		e.p.SetUpstream(addrs...)
		return
	}
	var t *time.Timer
	t = time.AfterFunc(e.lag, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.closed || e.timer != t {
			return // closed, or a later drill replaced this move
		}
		e.timer = nil
		e.p.SetUpstream(addrs...)
	})
	e.timer = t
}

// stop drops a pending move and makes the endpoint follow no more drills.
func (e *Endpoint) stop() {
	e.mu.Lock()
	e.closed = true
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	e.mu.Unlock()
}

// nodeAddrs returns the Addr of each node.
func nodeAddrs(nodes []*Node) []string {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// addrsOf returns the Addr of each node, or an error when one is not a
// node of c.
func (c *Cluster) addrsOf(nodes []*Node) ([]string, error) {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		if _, err := c.node(n); err != nil {
			return nil, err
		}
		addrs[i] = n.Addr()
	}
	return addrs, nil
}

// closeEndpoints closes every endpoint and refuses new ones.
func (c *Cluster) closeEndpoints() {
	c.epMu.Lock()
	c.epClosed = true
	eps := c.endpoints
	c.endpoints = nil
	c.epMu.Unlock()
	for e := range eps {
		e.stop()
		_ = e.p.Close()
	}
}

// Addr returns the endpoint's address, "127.0.0.1:port".
func (e *Endpoint) Addr() string { return e.p.Addr() }

// ConnString returns a connection string that names the endpoint alone,
// as the superuser "postgres" with the cluster's password and database,
// like Cluster.ConnString: params (like "pool_max_conns=4") are appended
// when not empty, a key in params wins over the same key before it, and
// with TLS sslmode is require.
func (e *Endpoint) ConnString(params string) string {
	return e.c.pc.ConnStringAt([]string{e.Addr()}, e.c.params(params))
}

// MoveTo makes the endpoint lead the connections it accepts from now on
// to the given nodes: to one node alone, or to each of several in turn,
// starting with the first. Open connections stay on the servers they
// reached; Cut ends them. With no node, new connections are accepted and
// closed at once, as an endpoint with nothing behind it does. On an
// endpoint that follows the drills, the next move a drill schedules, or
// one already pending, takes effect over it. MoveTo panics when a node is
// nil or of another cluster.
func (e *Endpoint) MoveTo(nodes ...*Node) {
	addrs, err := e.c.addrsOf(nodes)
	if err != nil {
		panic(err)
	}
	e.p.SetUpstream(addrs...)
}

// Cut closes every connection open through the endpoint, to the client
// and to the server, as an orderly close does (a FIN, no RST): what
// HAProxy's shutdown-sessions or a restarted Kubernetes pod does. The
// server ends the sessions as it does for a client that went away. New
// connections are accepted as before.
func (e *Endpoint) Cut() { e.p.Cut() }

// Close stops listening on the endpoint's address, drops a pending move,
// closes every connection through it and returns once it has stopped.
// Later calls do nothing.
func (e *Endpoint) Close() error {
	e.stop()
	e.c.epMu.Lock()
	delete(e.c.endpoints, e)
	e.c.epMu.Unlock()
	return e.p.Close()
}
