package failovertest

import (
	"errors"
	"fmt"
	"time"

	"github.com/pgfailover/pgfailover/internal/faultproxy"
)

// Proxies puts a TCP proxy in front of each server, through which the
// network faults of Node (SetLatency, SetBlackhole, ResetConnections) act.
// Node.Addr and ConnString then name the proxies, so that every connection
// of the application passes through them; replication between the servers
// and the harness's own connections (Node.Exec, Node.Query, Ledger.Check
// through a Node) do not.
//
// A proxy accepts a connection even while its server is down, then closes
// it: the client sees the connection end during its start-up instead of a
// refusal, as behind a load balancer.
func Proxies() Option { return func(o *options) { o.proxies = true } }

// ErrNoProxy is returned by the network faults of a node whose cluster was
// started without the Proxies option.
var ErrNoProxy = errors.New("failovertest: no proxy in front of the server (start the cluster with the Proxies option)")

// proxy is the fault proxy in front of a node; the zero value is none.
type proxy struct{ p *faultproxy.Proxy }

func (x proxy) addr() string {
	if x.p == nil {
		return ""
	}
	return x.p.Addr()
}

func (c *Cluster) startProxies() error {
	for _, n := range c.nodes {
		p, err := faultproxy.New(n.pn.Addr())
		if err != nil {
			return fmt.Errorf("failovertest: %s: starting its proxy: %w", n.Name(), err)
		}
		n.px = proxy{p}
	}
	return nil
}

// closeProxies closes every proxy and waits for their goroutines.
func (c *Cluster) closeProxies() {
	for _, n := range c.nodes {
		if n.px.p != nil {
			_ = n.px.p.Close()
		}
	}
}

// proxy returns the node's proxy, or an error naming the node.
func (n *Node) proxy() (*faultproxy.Proxy, error) {
	if n.px.p == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoProxy, n.Name())
	}
	return n.px.p, nil
}

// SetLatency delays every byte between the application and this server by
// d in each direction, so a round trip takes 2d longer, on open
// connections and new ones alike; 0 ends it. It needs the Proxies option.
func (n *Node) SetLatency(d time.Duration) error {
	p, err := n.proxy()
	if err != nil {
		return err
	}
	p.SetLatency(d)
	return nil
}

// SetBlackhole cuts the network between the application and this server
// (on) or mends it: while it lasts, every byte either way is dropped and
// nothing is closed, as when a host or a link vanishes; new connections
// are accepted and hear nothing. The server itself runs on and keeps
// streaming to or from the other servers. It needs the Proxies option.
func (n *Node) SetBlackhole(on bool) error {
	p, err := n.proxy()
	if err != nil {
		return err
	}
	p.SetBlackhole(on)
	return nil
}

// ResetConnections closes every open connection between the application
// and this server with a TCP RST each way, as a middlebox or a restarted
// peer does; what was in flight is lost. New connections are accepted as
// before. It needs the Proxies option.
func (n *Node) ResetConnections() error {
	p, err := n.proxy()
	if err != nil {
		return err
	}
	p.Reset()
	return nil
}
