package failovertest

import (
	"errors"
	"fmt"

	"github.com/pgfailover/pgfailover/internal/faultproxy"
)

// Endpoint is a TCP address on 127.0.0.1 in front of the cluster that
// leads to one node at a time, as a cloud provider's writer endpoint, a
// Kubernetes Service or HAProxy does, or spreads new connections over
// several nodes, as a reader endpoint does. Each new connection goes to
// the node the endpoint leads to when it is accepted; an open connection
// stays on the server it reached until the server or Cut ends it. The
// endpoint follows no failover by itself: the test moves it with MoveTo.
//
// Its methods are safe for concurrent use.
type Endpoint struct {
	c *Cluster
	p *faultproxy.Proxy
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
	addrs, err := c.addrsOf(to)
	if err != nil {
		return nil, err
	}
	p, err := faultproxy.New(addrs[0])
	if err != nil {
		return nil, fmt.Errorf("failovertest: starting an endpoint: %w", err)
	}
	p.SetUpstream(addrs...)
	e := &Endpoint{c: c, p: p}
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
// closed at once, as an endpoint with nothing behind it does. MoveTo
// panics when a node is nil or of another cluster.
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

// Close stops listening on the endpoint's address, closes every
// connection through it and returns once it has stopped. Later calls do
// nothing.
func (e *Endpoint) Close() error {
	e.c.epMu.Lock()
	delete(e.c.endpoints, e)
	e.c.epMu.Unlock()
	return e.p.Close()
}
