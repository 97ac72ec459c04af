package patroni

import (
	"strconv"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// MemberRole is a member's role as Patroni names it in GET /cluster;
// Claims turns it into the role the rest of the library ranks by.
type MemberRole uint8

const (
	// RoleUnknown: a role this package does not know, or none given.
	RoleUnknown MemberRole = iota
	// RoleLeader holds the leader lock: the primary ("leader", or
	// "master" in old versions).
	RoleLeader
	// RoleSyncStandby is a synchronous standby, the member Patroni
	// promotes first in synchronous mode.
	RoleSyncStandby
	// RoleQuorumStandby is a standby of a quorum-commit cluster.
	RoleQuorumStandby
	// RoleReplica is an asynchronous standby.
	RoleReplica
	// RoleStandbyLeader leads a standby cluster: it replicates from
	// another cluster and takes no writes.
	RoleStandbyLeader
)

var roleNames = [...]string{
	RoleUnknown:       "unknown",
	RoleLeader:        "leader",
	RoleSyncStandby:   "sync_standby",
	RoleQuorumStandby: "quorum_standby",
	RoleReplica:       "replica",
	RoleStandbyLeader: "standby_leader",
}

// String returns Patroni's spelling of r, or "unknown".
func (r MemberRole) String() string { return enumName(roleNames[:], int(r), "MemberRole") }

// enumName returns names[i], or "Type(i)" for a value with no name.
func enumName(names []string, i int, typ string) string {
	if i < len(names) {
		return names[i]
	}
	return typ + "(" + strconv.Itoa(i) + ")"
}

// ParseRole turns Patroni's spelling of a role into a MemberRole. It accepts
// "master", the spelling of Patroni before 3.0, as RoleLeader; anything it
// does not know is RoleUnknown.
func ParseRole(s string) MemberRole {
	if s == "master" {
		return RoleLeader
	}
	for r, name := range roleNames {
		if MemberRole(r) != RoleUnknown && name == s {
			return MemberRole(r)
		}
	}
	return RoleUnknown
}

// Claims returns the role r claims for the server in the terms of the
// rest of the library. A standby leader claims a replica, since it takes
// no writes.
func (r MemberRole) Claims() hosthealth.Role {
	switch r {
	case RoleLeader:
		return hosthealth.RolePrimary
	case RoleSyncStandby, RoleQuorumStandby, RoleReplica, RoleStandbyLeader:
		return hosthealth.RoleReplica
	}
	return hosthealth.RoleUnknown
}

// rank orders roles for a list of candidates, best first: the leader, then
// the standbys Patroni would promote first, then asynchronous replicas,
// then a standby leader, then anything unknown.
func (r MemberRole) rank() int {
	switch r {
	case RoleLeader:
		return 0
	case RoleSyncStandby:
		return 1
	case RoleQuorumStandby:
		return 2
	case RoleReplica:
		return 3
	case RoleStandbyLeader:
		return 4
	}
	return 5
}
