package hosthealth

import (
	"fmt"
	"strconv"
)

// State is what is believed about one host. The constants are
// declared best first, so a smaller State ranks ahead of a larger one.
type State uint8

const (
	// Healthy: the last connect, probe or query on the host worked: the
	// server answered. Whether its role suits a target is StateFor's to
	// say.
	Healthy State = iota
	// Unknown: not tried yet, or reset when a new outage began.
	Unknown
	// TransientReject: the server answered but asked to be tried again
	// later (starting up, too many clients).
	TransientReject
	// TransportError: the host could not be reached or the connection
	// broke (dial or TLS failure, timeout, EOF, reset, administrator
	// shutdown).
	TransportError
	// TopologyReject: the server is reachable but in the wrong role for the
	// target.
	TopologyReject
)

// numStates is the number of defined states.
const numStates = int(TopologyReject) + 1

var stateNames = [...]string{
	Healthy:         "healthy",
	Unknown:         "unknown",
	TransientReject: "transient-reject",
	TransportError:  "transport-error",
	TopologyReject:  "topology-reject",
}

// String returns the lower-case, hyphenated name of s.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Tier says how close a host is to the client, best first.
type Tier uint8

const (
	// TierSame: the host is in the client's zone, or zones do not matter
	// (the client set no zone, or the target is the primary).
	TierSame Tier = iota
	// TierUnknown: no zone is known for the host yet.
	TierUnknown
	// TierOther: the host is known to be in another zone.
	TierOther
)

// numTiers is the number of defined tiers.
const numTiers = int(TierOther) + 1

var tierNames = [...]string{
	TierSame:    "same",
	TierUnknown: "unknown",
	TierOther:   "other",
}

// String returns "same", "unknown" or "other".
func (t Tier) String() string {
	if int(t) < len(tierNames) {
		return tierNames[t]
	}
	return "Tier(" + strconv.Itoa(int(t)) + ")"
}

// Role is the replication role a server reported.
type Role uint8

const (
	// RoleUnknown: the role has not been observed.
	RoleUnknown Role = iota
	// RolePrimary: the server accepts writes (not in recovery).
	RolePrimary
	// RoleReplica: the server is a hot standby.
	RoleReplica
)

var roleNames = [...]string{
	RoleUnknown: "unknown",
	RolePrimary: "primary",
	RoleReplica: "replica",
}

// String returns "unknown", "primary" or "replica".
func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// Target is the kind of server a connection must reach, in the sense of
// libpq's target_session_attrs. The zero value is TargetPrimary, the
// library's default.
type Target uint8

const (
	// TargetPrimary accepts only a primary ("read-write", "primary").
	TargetPrimary Target = iota
	// TargetAny accepts any server ("any").
	TargetAny
	// TargetReplica accepts only a replica ("read-only", "standby",
	// "replica").
	TargetReplica
	// TargetPreferReplica accepts either role but ranks primaries last
	// while a replica is usable ("prefer-standby", "prefer-replica").
	TargetPreferReplica
)

var targetNames = [...]string{
	TargetPrimary:       "read-write",
	TargetAny:           "any",
	TargetReplica:       "read-only",
	TargetPreferReplica: "prefer-standby",
}

// targetSpellings lists every accepted spelling in the order the error
// message shows them.
var targetSpellings = [...]struct {
	name   string
	target Target
}{
	{"any", TargetAny},
	{"read-write", TargetPrimary},
	{"primary", TargetPrimary},
	{"read-only", TargetReplica},
	{"standby", TargetReplica},
	{"replica", TargetReplica},
	{"prefer-standby", TargetPreferReplica},
	{"prefer-replica", TargetPreferReplica},
}

// ParseTarget turns a target_session_attrs value (or the shorter target=
// alias) into a Target. Names are matched exactly and are lower case; the
// empty string is not accepted, so applying the default is up to the
// caller.
func ParseTarget(s string) (Target, error) {
	for _, sp := range targetSpellings {
		if sp.name == s {
			return sp.target, nil
		}
	}
	accepted := ""
	for i, sp := range targetSpellings {
		if i > 0 {
			accepted += ", "
		}
		accepted += sp.name
	}
	return TargetPrimary, fmt.Errorf("invalid target %q: accepted values are %s", s, accepted)
}

// String returns the canonical libpq name of t: "read-write", "any",
// "read-only" or "prefer-standby".
func (t Target) String() string {
	if int(t) < len(targetNames) {
		return targetNames[t]
	}
	return "Target(" + strconv.Itoa(int(t)) + ")"
}

// Accepts reports whether a connection to a server in role r may be used
// for target t. An unknown role is never accepted.
func (t Target) Accepts(r Role) bool {
	switch t {
	case TargetPrimary:
		return r == RolePrimary
	case TargetReplica:
		return r == RoleReplica
	case TargetAny, TargetPreferReplica:
		return r == RolePrimary || r == RoleReplica
	}
	return false
}
