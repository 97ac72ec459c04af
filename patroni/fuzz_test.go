package patroni

import (
	"slices"
	"testing"

	"github.com/pgfailover/pgfailover/hosthealth"
)

// maxIssueLen bounds the text of one issue: every value the decoder quotes
// from the answer is clipped.
const maxIssueLen = 300

func FuzzDecode(f *testing.F) {
	f.Add(readTestdata(f, "patroni-3.0.2-cluster.json"))
	f.Add(readTestdata(f, "patroni-4.x-cluster.json"))
	for _, s := range []string{
		``,
		`{}`,
		`{"members":null}`,
		`{"members":[null,1,"x",[],{}]}`,
		`{"members":[{"name":"a","host":"h","port":"5432","lag":"unknown","tags":{"nofailover":"yes","zone":7}}]}`,
		`{"members":[{"host":"h","port":1e3,"lsn":"FFFFFFFF/FFFFFFFF","lag":9223372036854775807}]}`,
		`{"members":[{"host":"h","port":-1}],"pause":"x"}`,
		`{"members":[{"name":"a","role":"master","state":"running","host":"::1","port":5432}]`,
		`{"members":[{"name":"\u0000\ud800","host":"\u00e9","port":65535,"tags":{"":{}}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			if c != nil {
				t.Fatal("a Cluster with an error")
			}
			return
		}
		if len(c.Members) > len(data)/8 || len(c.Issues) > len(data) {
			t.Fatalf("%d members and %d issues from %d bytes", len(c.Members), len(c.Issues), len(data))
		}
		for _, is := range c.Issues {
			if n := len(is.String()); n > maxIssueLen {
				t.Fatalf("issue of %d bytes: %s", n, is)
			}
		}
		for _, m := range c.Members {
			if m.Host == "" || m.Port == 0 {
				t.Fatalf("member without an address: %+v", m)
			}
			if !m.Live() && m.Claims() != hosthealth.RoleUnknown {
				t.Fatalf("member in state %q claims %v", m.State, m.Claims())
			}
			tm := m.Topology(DefaultZoneTag)
			if tm.Addr() != m.Addr() || tm.Tags[TagName] != m.Name {
				t.Fatalf("topology member %+v from %+v", tm, m)
			}
		}
		// Decoding is deterministic, issues included.
		again, _ := Decode(data)
		if !slices.EqualFunc(c.Issues, again.Issues, func(a, b Issue) bool { return a == b }) {
			t.Fatalf("issues differ between two decodings:\n%v\n%v", c.Issues, again.Issues)
		}
	})
}
