package kubernetes

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/topology"
)

// podJSON builds a pod as the API server returns it.
func podJSON(name, ip string, ready bool, labels map[string]string, ports ...any) json.RawMessage {
	status := "False"
	if ready {
		status = "True"
	}
	var ps []map[string]any
	for i := 0; i+1 < len(ports); i += 2 {
		ps = append(ps, map[string]any{"name": ports[i], "containerPort": ports[i+1]})
	}
	b, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": name, "labels": labels, "resourceVersion": "1"},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "postgres", "ports": ps}}},
		"status": map[string]any{"phase": "Running", "podIP": ip,
			"conditions": []any{map[string]any{"type": "Ready", "status": status}}},
	})
	return b
}

func mustPod(t *testing.T, raw json.RawMessage) *pod {
	t.Helper()
	p, err := decodePod(raw)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRoleOfLabels(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		user   string
		want   hosthealth.Role
		last   bool
	}{
		{map[string]string{LabelCNPGRole: "primary"}, "", hosthealth.RolePrimary, false},
		{map[string]string{LabelCNPGRole: "replica"}, "", hosthealth.RoleReplica, false},
		{map[string]string{LabelCNPGCluster: "pg", "role": "primary"}, "", hosthealth.RolePrimary, false},
		{map[string]string{"role": "primary"}, "", hosthealth.RoleUnknown, false}, // not a CNPG pod
		{map[string]string{LabelSpiloRole: "master"}, "", hosthealth.RolePrimary, false},
		{map[string]string{LabelSpiloRole: "replica"}, "", hosthealth.RoleReplica, false},
		{map[string]string{LabelSpiloRole: "standby_leader"}, "", hosthealth.RoleReplica, true},
		{map[string]string{LabelCrunchyRole: "master"}, "", hosthealth.RolePrimary, false},
		{map[string]string{LabelCrunchyRole: "replica"}, "", hosthealth.RoleReplica, false},
		{map[string]string{"db/role": "Leader", LabelSpiloRole: "replica"}, "db/role", hosthealth.RolePrimary, false},
		{map[string]string{LabelSpiloRole: "replica"}, "db/role", hosthealth.RoleReplica, false},
		{map[string]string{LabelCNPGRole: "something"}, "", hosthealth.RoleUnknown, false},
		{nil, "", hosthealth.RoleUnknown, false},
	} {
		p := mustPod(t, podJSON("p", "10.0.0.1", true, tc.labels))
		got, last := roleOf(p.roleLabel(tc.user))
		if got != tc.want || last != tc.last {
			t.Errorf("labels %v (user label %q): role %v, read last %v; want %v, %v", tc.labels, tc.user, got, last, tc.want, tc.last)
		}
	}
}

func TestReadyAndPort(t *testing.T) {
	terminating := mustPod(t, podJSON("p", "10.0.0.1", true, nil))
	ts := "2026-12-06T10:00:00Z"
	terminating.Metadata.DeletionTimestamp = &ts
	failed := mustPod(t, podJSON("p", "10.0.0.1", true, nil))
	failed.Status.Phase = "Failed"
	for _, tc := range []struct {
		name string
		p    *pod
		want bool
	}{
		{"ready", mustPod(t, podJSON("p", "10.0.0.1", true, nil)), true},
		{"not ready", mustPod(t, podJSON("p", "10.0.0.1", false, nil)), false},
		{"no address", mustPod(t, podJSON("p", "", true, nil)), false},
		{"terminating", terminating, false},
		{"failed", failed, false},
		{"no conditions", mustPod(t, json.RawMessage(`{"metadata":{"name":"p"},"status":{"podIP":"10.0.0.1"}}`)), false},
	} {
		if got := tc.p.ready(); got != tc.want {
			t.Errorf("%s: ready %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		ports []any
		name  string
		want  uint16
		ok    bool
	}{
		{nil, "", DefaultPort, true},
		{[]any{"postgresql", 5433}, "", 5433, true},
		{[]any{"metrics", 9187, "postgres", 6000}, "", 6000, true},
		{[]any{"metrics", 9187}, "", DefaultPort, true},
		{[]any{"postgresql", 5433, "bouncer", 6432}, "bouncer", 6432, true},
		{[]any{"postgresql", 5433}, "bouncer", 0, false},
	} {
		p := mustPod(t, podJSON("p", "10.0.0.1", true, nil, tc.ports...))
		if got, ok := p.port(tc.name); got != tc.want || ok != tc.ok {
			t.Errorf("ports %v, name %q: %d %v, want %d %v", tc.ports, tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// show lists members as "pod=addr role", in order.
func show(ms []topology.Member) string {
	var out []string
	for _, m := range ms {
		s := m.Tags[TagPod] + "=" + m.Addr() + " " + m.Role.String()
		if m.Zone != "" {
			s += " " + m.Zone
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func TestMembersFromClusterStatus(t *testing.T) {
	cnpg := func(role string) map[string]string {
		return map[string]string{LabelCNPGCluster: "pg", LabelCNPGRole: role, DefaultZoneLabel: "z-" + role}
	}
	pods := func() map[string]*pod {
		return map[string]*pod{
			"pg-1": mustPod(t, podJSON("pg-1", "127.0.0.2", true, cnpg("primary"))),
			"pg-2": mustPod(t, podJSON("pg-2", "127.0.0.3", true, cnpg("replica"))),
			"pg-3": mustPod(t, podJSON("pg-3", "127.0.0.4", false, cnpg("replica"))),
		}
	}
	cluster := func(current, target string) *cnpgCluster {
		c := &cnpgCluster{}
		c.Metadata.Name = "pg"
		c.Status.CurrentPrimary, c.Status.TargetPrimary = current, target
		return c
	}
	for _, tc := range []struct {
		name    string
		cluster *cnpgCluster
		want    string
	}{
		{"labels only", nil, "pg-1=127.0.0.2:5432 primary z-primary, pg-2=127.0.0.3:5432 replica z-replica"},
		{"steady", cluster("pg-1", "pg-1"), "pg-1=127.0.0.2:5432 primary z-primary, pg-2=127.0.0.3:5432 replica z-replica"},
		{"status before labels", cluster("pg-2", "pg-2"), "pg-2=127.0.0.3:5432 primary z-replica, pg-1=127.0.0.2:5432 unknown z-primary"},
		{"switchover announced", cluster("pg-1", "pg-2"), "pg-2=127.0.0.3:5432 primary z-replica"},
		{"target not ready yet", cluster("pg-1", "pg-3"), "pg-3=127.0.0.4:5432 primary z-replica, pg-2=127.0.0.3:5432 replica z-replica"},
		{"failover pending", cluster("pg-1", PendingFailover), "pg-2=127.0.0.3:5432 replica z-replica"},
		{"no status yet", cluster("", ""), "pg-1=127.0.0.2:5432 unknown z-primary, pg-2=127.0.0.3:5432 replica z-replica"},
	} {
		v := view{pods: pods(), cluster: tc.cluster}
		got, notes := v.members(memberRules{zoneLabel: DefaultZoneLabel})
		if show(got) != tc.want || len(notes) > 0 {
			t.Errorf("%s:\n got %s %v\nwant %s", tc.name, show(got), notes, tc.want)
		}
	}
}

func TestMembersLeaveOut(t *testing.T) {
	v := view{pods: map[string]*pod{
		"a": mustPod(t, podJSON("a", "10.0.0.1", true, nil, "postgresql", 5432)),
		"b": mustPod(t, podJSON("b", "10.0.0.1", true, nil, "postgresql", 5432)),
		"c": mustPod(t, podJSON("c", "10.0.0.2", true, nil, "other", 5432)),
	}}
	got, notes := v.members(memberRules{portName: "postgresql"})
	if want := "a=10.0.0.1:5432 unknown"; show(got) != want {
		t.Errorf("members %s, want %s", show(got), want)
	}
	if got, want := fmt.Sprint(notes), "[pod b skipped: its address 10.0.0.1:5432 is another pod's pod c has no container port named postgresql]"; got != want {
		t.Errorf("notes %s\nwant %s", got, want)
	}
}
