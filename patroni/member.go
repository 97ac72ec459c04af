package patroni

import (
	"strconv"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/replica"
	"github.com/pgfailover/pgfailover/topology"
)

// Tag keys that Member.Topology puts in topology.Member.Tags.
const (
	// TagName holds the member's Patroni name.
	TagName = "patroni.name"
	// TagRole holds the member's Patroni role as Patroni spells it
	// ("leader", "sync_standby", "standby_leader", ...; "master" is written
	// "leader"): finer than the claimed hosthealth.Role, which folds every
	// standby into a replica.
	TagRole = "patroni.role"
	// TagState holds the member's Patroni state ("running", "streaming",
	// "stopped", ...).
	TagState = "patroni.state"
	// TagNoFailover is "true" when the member is tagged nofailover:
	// Patroni never promotes it.
	TagNoFailover = "patroni.nofailover"
)

// Cluster is one answer of GET /cluster.
type Cluster struct {
	// Members are the members that could be used, in the order of the
	// answer (Patroni sorts them by name).
	Members []Member
	// Issues lists what the decoder could not use: members it skipped and
	// fields it ignored, with the reason for each.
	Issues []Issue
	// Paused is true while the cluster is in maintenance mode.
	Paused bool
	// Scope is the cluster's name; Patroni reports it from 3.2 on.
	Scope string
}

// Member is one member of a Patroni cluster. Fields the answer left out
// keep their zero value, except the lags, which are UnknownLag.
type Member struct {
	Name string
	// Role is the role Patroni reports; RoleName is its spelling.
	Role     MemberRole
	RoleName string
	// State is Patroni's state of the member: "running" and, from 3.0.4,
	// "streaming" for a replica that receives WAL; "starting",
	// "stopped", "crashed", "in archive recovery" and so on otherwise.
	State string
	Host  string
	Port  uint16
	// Timeline is the member's PostgreSQL timeline, 0 when not reported.
	Timeline int64
	// Lag is how far the member is behind the leader, in bytes of WAL;
	// Patroni 4.1 adds ReceiveLag and ReplayLag. The leader has none.
	Lag, ReceiveLag, ReplayLag Lag
	// LSN, ReceiveLSN and ReplayLSN are the member's WAL positions
	// (Patroni 4.1 and later); 0 when not reported.
	LSN, ReceiveLSN, ReplayLSN replica.LSN
	// NoFailover and NoLoadBalance are the Patroni tags of those names.
	NoFailover, NoLoadBalance bool
	// Tags holds every tag whose value is a string, a number or a bool,
	// written as text ("true", "42").
	Tags map[string]string
}

// Live reports whether Patroni sees the member's PostgreSQL up: its state
// is "running" or "streaming". Only then does its role mean anything.
func (m Member) Live() bool {
	return m.State == "running" || m.State == "streaming"
}

// Claims returns the role the member claims, as a hint for the rest of the
// library: RoleUnknown unless the member is Live.
func (m Member) Claims() hosthealth.Role {
	if !m.Live() {
		return hosthealth.RoleUnknown
	}
	return m.Role.Claims()
}

// Addr returns host:port, the member's identity.
func (m Member) Addr() string {
	return topology.Member{Host: m.Host, Port: m.Port}.Addr()
}

// Topology returns the member as a topology.Member. Its zone is the value
// of the tag named zoneTag: "" when the member has no such tag or zoneTag
// is "". A standby cluster's leader reads last (ReadLast). Tags carries
// TagName, TagRole and TagState, and TagNoFailover when set.
func (m Member) Topology(zoneTag string) topology.Member {
	role := m.RoleName
	if m.Role != RoleUnknown {
		role = m.Role.String() // "master" becomes "leader"
	}
	tags := map[string]string{TagName: m.Name, TagRole: role, TagState: m.State}
	if m.NoFailover {
		tags[TagNoFailover] = "true"
	}
	zone := ""
	if zoneTag != "" {
		zone = m.Tags[zoneTag]
	}
	return topology.Member{
		Host:          m.Host,
		Port:          m.Port,
		Zone:          zone,
		Role:          m.Claims(),
		NoLoadBalance: m.NoLoadBalance,
		ReadLast:      m.Role == RoleStandbyLeader,
		Tags:          tags,
	}
}

// rank orders members for a list of candidates: by role, and a member
// whose role is only claimed while it is not Live ranks with the unknown.
func (m Member) rank() int {
	if !m.Live() {
		return RoleUnknown.rank()
	}
	return m.Role.rank()
}

// Lag is a replication lag in bytes of WAL.
type Lag int64

// UnknownLag stands for a lag Patroni did not know ("unknown") or did not
// report.
const UnknownLag Lag = -1

// Known reports whether the lag was reported.
func (l Lag) Known() bool { return l >= 0 }

// String returns the number of bytes, or "unknown".
func (l Lag) String() string {
	if !l.Known() {
		return "unknown"
	}
	return strconv.FormatInt(int64(l), 10)
}

// Issue is something in an answer that the decoder could not use.
type Issue struct {
	// Index is the member's position in the answer's members list.
	Index int
	// Name is the member's name, "" when it has none; a longer name than
	// 40 bytes is cut there and ends in "...".
	Name string
	// Field names the ignored field; "" when the whole member was
	// skipped.
	Field string
	// Reason says what was wrong.
	Reason string
}

// Skipped reports whether the whole member was left out.
func (i Issue) Skipped() bool { return i.Field == "" }

// String describes the issue in one line.
func (i Issue) String() string {
	who := "member #" + strconv.Itoa(i.Index)
	if i.Name != "" {
		who += " " + strconv.Quote(i.Name)
	}
	if i.Skipped() {
		return who + " skipped: " + i.Reason
	}
	return who + ": field " + i.Field + " ignored: " + i.Reason
}
