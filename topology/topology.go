package topology

import (
	"context"
	"net"
	"strconv"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// Member is one PostgreSQL server of a cluster, as a Source describes it.
type Member struct {
	// Host is a host name, an IP address or a unix socket directory.
	Host string
	Port uint16
	// Zone is the member's zone, "" when the source does not know it.
	Zone string
	// Role is the role the source claims for the member, RoleUnknown when
	// it does not say. It is a hint only: the Pool trusts what the server
	// itself reports over it.
	Role hosthealth.Role
	// NoLoadBalance asks that the member be given no read traffic.
	NoLoadBalance bool
	// ReadLast asks that the member take reads only when no other replica
	// qualifies: it replicates from outside the cluster (a Patroni standby
	// cluster's leader, which follows another cluster's primary).
	ReadLast bool
	// Tags are the source's other labels for the member, if any. The map
	// must not be modified once handed to an update function.
	Tags map[string]string
}

// Addr returns host:port, with brackets around an IPv6 address: the
// member's identity.
func (m Member) Addr() string {
	return net.JoinHostPort(m.Host, strconv.FormatUint(uint64(m.Port), 10))
}

// Topology is the whole membership of a cluster at one moment.
type Topology struct {
	Members []Member
}

// Source tells which servers exist. The Pool calls Watch once, from a
// goroutine of its own, and merges what it reports with the hosts of the
// connection string.
type Source interface {
	// Watch calls update with the complete topology each time it may have
	// changed, the first time as soon as it is known, until ctx ends. Calls
	// of update are never concurrent, and update does not block on I/O.
	// Watch returns when ctx ends; an error it returns earlier is logged
	// and the last topology it reported stays in force.
	//
	// A source that cannot reach its backend keeps quiet rather than
	// reporting an empty topology: an update replaces the whole set.
	Watch(ctx context.Context, update func(Topology)) error
}

// Static is a Source whose membership never changes.
type Static Topology

// Watch reports the members once and waits for ctx to end.
func (s Static) Watch(ctx context.Context, update func(Topology)) error {
	update(Topology(s))
	<-ctx.Done()
	return nil
}

// Refresher is implemented by a Source that can be asked to look at its
// backend again at once rather than at its next interval. The Pool asks
// when a host fails and when a call starts waiting for a usable host.
// Refresh must not block.
type Refresher interface {
	Refresh()
}
