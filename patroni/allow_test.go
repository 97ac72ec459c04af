package patroni

import (
	"strings"
	"testing"
)

func TestAllowList(t *testing.T) {
	tests := []struct {
		list  string
		allow []string
		deny  []string
	}{
		{"", []string{"10.0.0.1", "anything", "::1"}, nil},
		{"  ", []string{"10.0.0.1"}, nil},
		{
			"10.0.0.0/8, 192.0.2.7 ,fd00::/8",
			[]string{"10.1.2.3", "192.0.2.7", "fd00::1", "::ffff:10.9.9.9", "fd00::1%eth0"},
			[]string{"192.0.2.8", "11.0.0.1", "fe80::1", "db.internal", "10.0.0.1.example.com"},
		},
		{
			"*.db.internal,Primary.Example.COM.",
			[]string{"a.db.internal", "a.b.db.internal", "A.DB.INTERNAL", "a.db.internal.", "primary.example.com"},
			[]string{"db.internal", "xdb.internal", "adb.internal", "b.primary.example.com", "10.0.0.1", "/var/run/postgresql"},
		},
		{
			// A name is never resolved: an IP member is matched by networks only.
			"localhost",
			[]string{"localhost"},
			[]string{"127.0.0.1", "::1"},
		},
	}
	for _, tt := range tests {
		a, err := ParseAllowList(tt.list)
		if err != nil {
			t.Fatalf("%q: %v", tt.list, err)
		}
		for _, h := range tt.allow {
			if !a.Allows(h) {
				t.Errorf("%q should allow %q", tt.list, h)
			}
		}
		for _, h := range tt.deny {
			if a.Allows(h) {
				t.Errorf("%q should not allow %q", tt.list, h)
			}
		}
	}
}

func TestAllowListErrors(t *testing.T) {
	tests := []struct{ list, want string }{
		{"10.0.0.0/8,,a", `entry 2 "": empty entry`},
		{"10.0.0.0/33", `entry 1 "10.0.0.0/33": not a network`},
		{"a,host/24", `entry 2 "host/24": not a network`},
		{"*", `entry 1 "*": not a host name`},
		{"*.", `entry 1 "*.": not a host name pattern`},
		{"a.*.b", `entry 1 "a.*.b": not a host name`},
		{"db*.internal", `entry 1 "db*.internal": not a host name`},
		{"*.*.internal", `entry 1 "*.*.internal": not a host name pattern`},
		{"a..b", `entry 1 "a..b": not a host name`},
		{"user:pw@host", `entry 1 "user:pw@host": not a host name`},
		{"10.0.0.256", `entry 1 "10.0.0.256": not a host name`},
	}
	for _, tt := range tests {
		_, err := ParseAllowList(tt.list)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseAllowList(%q) = %v, want an error containing %q", tt.list, err, tt.want)
		}
	}
}

func TestAllowListString(t *testing.T) {
	a, err := ParseAllowList(" 10.0.0.0/8 , *.db.internal")
	if err != nil {
		t.Fatal(err)
	}
	if got := a.String(); got != "10.0.0.0/8,*.db.internal" {
		t.Errorf("String() = %q", got)
	}
}
