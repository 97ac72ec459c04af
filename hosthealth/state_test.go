package hosthealth

import (
	"strings"
	"testing"
)

func TestStrings(t *testing.T) {
	tests := []struct {
		got  string
		want string
	}{
		{Healthy.String(), "healthy"},
		{Unknown.String(), "unknown"},
		{TransientReject.String(), "transient-reject"},
		{TransportError.String(), "transport-error"},
		{TopologyReject.String(), "topology-reject"},
		{State(9).String(), "State(9)"},

		{TierSame.String(), "same"},
		{TierUnknown.String(), "unknown"},
		{TierOther.String(), "other"},
		{Tier(7).String(), "Tier(7)"},

		{RoleUnknown.String(), "unknown"},
		{RolePrimary.String(), "primary"},
		{RoleReplica.String(), "replica"},
		{Role(3).String(), "Role(3)"},

		{TargetPrimary.String(), "read-write"},
		{TargetAny.String(), "any"},
		{TargetReplica.String(), "read-only"},
		{TargetPreferReplica.String(), "prefer-standby"},
		{Target(4).String(), "Target(4)"},

		{NotFailover.String(), "not-failover"},
		{Terminal.String(), "terminal"},
		{Topology.String(), "topology"},
		{Transient.String(), "transient"},
		{Transport.String(), "transport"},
		{Class(5).String(), "Class(5)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestStateOrder(t *testing.T) {
	order := []State{Healthy, Unknown, TransientReject, TransportError, TopologyReject}
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] {
			t.Errorf("%v must rank before %v", order[i-1], order[i])
		}
	}
	if !(TierSame < TierUnknown && TierUnknown < TierOther) {
		t.Error("tiers out of order")
	}
	var zero Target
	if zero != TargetPrimary {
		t.Error("the zero Target must be TargetPrimary")
	}
}

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in   string
		want Target
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
	for _, tt := range tests {
		got, err := ParseTarget(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseTarget(%q) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
		}
		// The canonical name parses back to the same target.
		if back, err := ParseTarget(got.String()); err != nil || back != got {
			t.Errorf("ParseTarget(%q) = %v, %v; want %v", got.String(), back, err, got)
		}
	}

	for _, bad := range []string{"", "Read-Write", "PRIMARY", "prefer_standby", " any", "any ", "master", "slave", "prefer-primary"} {
		_, err := ParseTarget(bad)
		if err == nil {
			t.Errorf("ParseTarget(%q): want an error", bad)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, `"`+bad+`"`) {
			t.Errorf("ParseTarget(%q): error %q does not quote the value", bad, msg)
		}
		for _, name := range []string{"any", "read-write", "primary", "read-only", "standby", "replica", "prefer-standby", "prefer-replica"} {
			if !strings.Contains(msg, name) {
				t.Errorf("ParseTarget(%q): error %q does not list %q", bad, msg, name)
			}
		}
	}
}

func TestTargetAccepts(t *testing.T) {
	type row struct{ unknown, primary, replica bool }
	tests := []struct {
		target Target
		want   row
	}{
		{TargetPrimary, row{false, true, false}},
		{TargetAny, row{false, true, true}},
		{TargetReplica, row{false, false, true}},
		{TargetPreferReplica, row{false, true, true}},
		{Target(99), row{false, false, false}},
	}
	for _, tt := range tests {
		got := row{
			tt.target.Accepts(RoleUnknown),
			tt.target.Accepts(RolePrimary),
			tt.target.Accepts(RoleReplica),
		}
		if got != tt.want {
			t.Errorf("%v: Accepts(unknown, primary, replica) = %v, want %v", tt.target, got, tt.want)
		}
	}
}

func TestRoleErrorMessage(t *testing.T) {
	tests := []struct {
		err  RoleError
		want string
	}{
		{RoleError{"10.0.0.2:5432", RoleReplica, TargetPrimary}, "host 10.0.0.2:5432 is a replica; target read-write needs a primary"},
		{RoleError{"db-a:5432", RolePrimary, TargetReplica}, "host db-a:5432 is a primary; target read-only needs a replica"},
		{RoleError{"db-b:5432", RoleUnknown, TargetAny}, "host db-b:5432 has an unknown role; target any needs a primary or a replica"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got %q\nwant %q", got, tt.want)
		}
	}
}
