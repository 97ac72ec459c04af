package patroni

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/pgfailover/pgfailover/hosthealth"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// brief is what the tests check of a decoded member.
type brief struct {
	name, addr, role, state string
	claims                  hosthealth.Role
	lag                     string
}

func briefOf(m Member) brief {
	return brief{m.Name, m.Addr(), m.Role.String(), m.State, m.Claims(), m.Lag.String()}
}

func TestDecodeCaptured(t *testing.T) {
	c, err := Decode(readTestdata(t, "patroni-3.0.2-cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []brief{
		{"pa1", "127.0.0.1:35451", "leader", "running", hosthealth.RolePrimary, "unknown"},
		{"pa2", "127.0.0.1:35452", "replica", "running", hosthealth.RoleReplica, "0"},
		{"pa3", "127.0.0.1:35453", "replica", "running", hosthealth.RoleReplica, "0"},
	}
	if len(c.Members) != len(want) || len(c.Issues) != 0 {
		t.Fatalf("members %v, issues %v", c.Members, c.Issues)
	}
	for i, w := range want {
		if got := briefOf(c.Members[i]); got != w {
			t.Errorf("member %d: got %+v, want %+v", i, got, w)
		}
		if c.Members[i].Timeline != 1 {
			t.Errorf("member %d: timeline %d", i, c.Members[i].Timeline)
		}
	}
	if c.Scope != "" || c.Paused {
		t.Errorf("scope %q paused %v", c.Scope, c.Paused)
	}
}

func TestDecodeVersion4(t *testing.T) {
	c, err := Decode(readTestdata(t, "patroni-4.x-cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Scope != "orders" || len(c.Members) != 4 || len(c.Issues) != 0 {
		t.Fatalf("scope %q, members %d, issues %v", c.Scope, len(c.Members), c.Issues)
	}
	b, cm, d := c.Members[1], c.Members[2], c.Members[3]
	if b.Role != RoleSyncStandby || b.Claims() != hosthealth.RoleReplica || b.ReplayLag != 128 ||
		b.ReceiveLag != 0 || b.ReplayLSN.String() != "0/50000C8" || b.LSN != 0x5000148 {
		t.Errorf("sync standby: %+v", b)
	}
	if !cm.NoLoadBalance || !cm.NoFailover || cm.Lag.Known() || cm.ReplayLSN != 0 || cm.Tags["zone"] != "eu-1c" {
		t.Errorf("replica: %+v", cm)
	}
	// A claimed role counts only while Patroni sees the server up.
	if d.Role != RoleQuorumStandby || d.Claims() != hosthealth.RoleUnknown || d.Lag != 16777216 {
		t.Errorf("quorum standby in archive recovery: %+v", d)
	}
}

func TestDecodeMembers(t *testing.T) {
	tests := []struct {
		name    string
		member  string // one element of the members list
		want    *brief // nil: skipped
		issues  []string
		checkFn func(t *testing.T, m Member)
	}{
		{
			name:   "old leader spelling",
			member: `{"name":"a","role":"master","state":"running","host":"h","port":5432}`,
			want:   &brief{"a", "h:5432", "leader", "running", hosthealth.RolePrimary, "unknown"},
		},
		{
			name:   "standby leader is a replica",
			member: `{"name":"a","role":"standby_leader","state":"streaming","host":"h","port":5432}`,
			want:   &brief{"a", "h:5432", "standby_leader", "streaming", hosthealth.RoleReplica, "unknown"},
		},
		{
			name:   "unknown role kept",
			member: `{"name":"a","role":"witness","state":"running","host":"h","port":5432}`,
			want:   &brief{"a", "h:5432", "unknown", "running", hosthealth.RoleUnknown, "unknown"},
			checkFn: func(t *testing.T, m Member) {
				if m.RoleName != "witness" {
					t.Errorf("RoleName %q", m.RoleName)
				}
			},
		},
		{
			name:   "unknown state claims nothing",
			member: `{"name":"a","role":"leader","state":"restarting","host":"h","port":5432}`,
			want:   &brief{"a", "h:5432", "leader", "restarting", hosthealth.RoleUnknown, "unknown"},
		},
		{
			name:   "stopped leader claims nothing",
			member: `{"name":"a","role":"leader","state":"stopped","host":"h","port":5432}`,
			want:   &brief{"a", "h:5432", "leader", "stopped", hosthealth.RoleUnknown, "unknown"},
		},
		{
			name:   "port as a string",
			member: `{"name":"a","role":"replica","state":"running","host":"::1","port":"6432","lag":"42"}`,
			want:   &brief{"a", "[::1]:6432", "replica", "running", hosthealth.RoleReplica, "42"},
		},
		{name: "no host", member: `{"name":"a","role":"replica","state":"running","port":5432}`, issues: []string{`member #0 "a" skipped: no host`}},
		{name: "null host", member: `{"name":"a","host":null,"port":5432}`, issues: []string{`member #0 "a" skipped: no host`}},
		{name: "empty host", member: `{"name":"a","host":"","port":5432}`, issues: []string{`member #0 "a" skipped: empty host`}},
		{name: "no port", member: `{"name":"a","host":"h"}`, issues: []string{`member #0 "a" skipped: no port`}},
		{name: "host a number", member: `{"name":"a","host":12,"port":5432}`, issues: []string{`member #0 "a" skipped: host: want a string, got a number 12`}},
		{name: "port zero", member: `{"host":"h","port":0}`, issues: []string{`member #0 skipped: port 0 out of range`}},
		{name: "port too big", member: `{"host":"h","port":70000}`, issues: []string{`member #0 skipped: port 70000 out of range`}},
		{name: "port a float", member: `{"host":"h","port":5432.5}`, issues: []string{`member #0 skipped: port: want an integer, got a number 5432.5`}},
		{name: "port a bool", member: `{"host":"h","port":true}`, issues: []string{`member #0 skipped: port: want an integer, got a boolean true`}},
		{name: "member a string", member: `"pa1"`, issues: []string{`member #0 skipped: not an object: a string`}},
		{name: "member null", member: `null`, issues: []string{`member #0 skipped: no host`}},
		{
			name:   "wrong types in optional fields",
			member: `{"name":7,"role":["leader"],"state":{},"host":"h","port":1,"timeline":"x","lag":-5,"lsn":"zz","tags":[]}`,
			want:   &brief{"", "h:1", "unknown", "", hosthealth.RoleUnknown, "unknown"},
			issues: []string{
				"member #0: field name ignored: want a string, got a number 7",
				`member #0: field role ignored: want a string, got a list ["leader"]`,
				"member #0: field state ignored: want a string, got an object {}",
				`member #0: field timeline ignored: want an integer, got a string "x"`,
				`member #0: field lag ignored: want a byte count or "unknown", got a number -5`,
				`member #0: field lsn ignored: want an LSN, got a string "zz"`,
				"member #0: field tags ignored: not an object: a list",
			},
		},
		{
			name:   "tags of every type",
			member: `{"name":"a","host":"h","port":1,"tags":{"zone":"eu","nofailover":"TRUE","noloadbalance":0,"weight":2.5,"clonefrom":true,"x":{"y":1},"n":null}}`,
			want:   &brief{"a", "h:1", "unknown", "", hosthealth.RoleUnknown, "unknown"},
			issues: []string{
				`member #0 "a": field tags.x ignored: want a string, number or boolean, got an object {"y":1}`,
			},
			checkFn: func(t *testing.T, m Member) {
				if !m.NoFailover || m.NoLoadBalance {
					t.Errorf("nofailover %v noloadbalance %v", m.NoFailover, m.NoLoadBalance)
				}
				if m.Tags["weight"] != "2.5" || m.Tags["clonefrom"] != "true" || m.Tags["zone"] != "eu" || len(m.Tags) != 5 {
					t.Errorf("tags %v", m.Tags)
				}
			},
		},
		{
			name:   "a flag that is not a boolean",
			member: `{"name":"a","host":"h","port":1,"tags":{"nofailover":"maybe","noloadbalance":[]}}`,
			want:   &brief{"a", "h:1", "unknown", "", hosthealth.RoleUnknown, "unknown"},
			issues: []string{
				`member #0 "a": field tags.nofailover ignored: want a boolean, got a string "maybe"`,
				`member #0 "a": field tags.noloadbalance ignored: want a boolean, got a list []`,
			},
		},
		{
			name:   "long values are clipped in issues",
			member: `{"name":"` + strings.Repeat("n", 100) + `","host":"h","port":1,"timeline":"` + strings.Repeat("t", 100) + `"}`,
			want:   &brief{strings.Repeat("n", 100), "h:1", "unknown", "", hosthealth.RoleUnknown, "unknown"},
			issues: []string{`member #0 "` + strings.Repeat("n", 40) + `...": field timeline ignored: want an integer, got a string "` + strings.Repeat("t", 39) + `...`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Decode([]byte(`{"members":[` + tt.member + `]}`))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, is := range c.Issues {
				got = append(got, is.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.issues, "\n") {
				t.Errorf("issues:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.issues, "\n"))
			}
			if tt.want == nil {
				if len(c.Members) != 0 {
					t.Fatalf("want the member skipped, got %+v", c.Members)
				}
				return
			}
			if len(c.Members) != 1 {
				t.Fatalf("want one member, got %d", len(c.Members))
			}
			if got := briefOf(c.Members[0]); got != *tt.want {
				t.Errorf("got %+v, want %+v", got, *tt.want)
			}
			if tt.checkFn != nil {
				tt.checkFn(t, c.Members[0])
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, body string
		noMembers  bool
	}{
		{"empty", ``, false},
		{"truncated", `{"members":[{"name":"a"`, false},
		{"not json", `<html>502 Bad Gateway</html>`, false},
		{"a list", `[{"name":"a"}]`, false},
		{"no members", `{"scope":"x"}`, true},
		{"members null", `{"members":null}`, true},
		{"members an object", `{"members":{"a":1}}`, true},
		{"trailing garbage", `{"members":[]} x`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Decode([]byte(tt.body))
			if err == nil {
				t.Fatalf("want an error, got %+v", c)
			}
			if errors.Is(err, ErrNoMembers) != tt.noMembers {
				t.Errorf("errors.Is(ErrNoMembers) = %v: %v", !tt.noMembers, err)
			}
		})
	}
}

func TestDecodeClusterFields(t *testing.T) {
	c, err := Decode([]byte(`{"members":[],"pause":true,"scope":"s","scheduled_switchover":{"at":"x"}}`))
	if err != nil || !c.Paused || c.Scope != "s" || len(c.Members) != 0 {
		t.Fatalf("%+v %v", c, err)
	}
	// Wrong types in cluster-wide fields cost nothing.
	c, err = Decode([]byte(`{"members":[],"pause":"yes","scope":3}`))
	if err != nil || c.Paused || c.Scope != "" {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestRole(t *testing.T) {
	tests := []struct {
		in     string
		want   MemberRole
		claims hosthealth.Role
	}{
		{"leader", RoleLeader, hosthealth.RolePrimary},
		{"master", RoleLeader, hosthealth.RolePrimary},
		{"sync_standby", RoleSyncStandby, hosthealth.RoleReplica},
		{"quorum_standby", RoleQuorumStandby, hosthealth.RoleReplica},
		{"replica", RoleReplica, hosthealth.RoleReplica},
		{"standby_leader", RoleStandbyLeader, hosthealth.RoleReplica},
		{"unknown", RoleUnknown, hosthealth.RoleUnknown},
		{"Leader", RoleUnknown, hosthealth.RoleUnknown},
		{"", RoleUnknown, hosthealth.RoleUnknown},
	}
	for _, tt := range tests {
		r := ParseRole(tt.in)
		if r != tt.want || r.Claims() != tt.claims {
			t.Errorf("ParseRole(%q) = %v claiming %v, want %v claiming %v", tt.in, r, r.Claims(), tt.want, tt.claims)
		}
		if tt.want != RoleUnknown && tt.in != "master" && r.String() != tt.in {
			t.Errorf("%v.String() = %q", r, r.String())
		}
	}
	if got := MemberRole(99).String(); got != "MemberRole(99)" {
		t.Errorf("MemberRole(99).String() = %q", got)
	}
}

func TestValueStrings(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{Lag(0).String(), "0"},
		{Lag(1 << 20).String(), "1048576"},
		{UnknownLag.String(), "unknown"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
