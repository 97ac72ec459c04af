package hosthealth

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// model is a deliberately naive restatement of the tracker's rules, used
// as the oracle for FuzzTracker.
type model struct {
	target Target
	zone   string
	hosts  []modelHost
	outage bool
}

type modelHost struct {
	state State
	role  Role
	zone  string
}

func (m *model) tier(zone string) Tier {
	if m.target == TargetPrimary || m.zone == "" {
		return TierSame
	}
	if zone == "" {
		return TierUnknown
	}
	if strings.ToLower(zone) == strings.ToLower(m.zone) {
		return TierSame
	}
	return TierOther
}

func (m *model) connect(i int, r Role) {
	m.hosts[i].role = r
	if m.target.Accepts(r) {
		m.hosts[i].state = Healthy
		m.outage = false
	} else {
		m.hosts[i].state = TopologyReject
	}
}

func (m *model) fail(i int, c Class) {
	next := map[Class]State{Topology: TopologyReject, Transient: TransientReject, Transport: TransportError}
	s, ok := next[c]
	if !ok {
		return
	}
	if !m.outage {
		m.outage = true
		for j := range m.hosts {
			if m.hosts[j].state == Healthy && m.tier(m.hosts[j].zone) == TierOther {
				m.hosts[j].state = Unknown
			}
		}
	}
	m.hosts[i].state = s
}

func (m *model) observeZone(i int, z string) {
	if z != "" {
		m.hosts[i].zone = z
	}
}

// ranking sorts by selection: repeatedly take the first remaining host
// with the smallest (state, tier).
func (m *model) ranking() []int {
	replicaUsable := false
	for _, h := range m.hosts {
		if h.role == RoleReplica && (h.state == Healthy || h.state == Unknown || h.state == TransientReject) {
			replicaUsable = true
		}
	}
	rankState := func(h modelHost) State {
		if m.target == TargetPreferReplica && h.role == RolePrimary && replicaUsable {
			return TopologyReject
		}
		return h.state
	}
	less := func(a, b modelHost) bool {
		sa, sb := rankState(a), rankState(b)
		if sa != sb {
			return sa < sb
		}
		return m.tier(a.zone) < m.tier(b.zone)
	}
	taken := make([]bool, len(m.hosts))
	var out []int
	for range m.hosts {
		best := -1
		for i, h := range m.hosts {
			if taken[i] {
				continue
			}
			if best < 0 || less(h, m.hosts[best]) {
				best = i
			}
		}
		taken[best] = true
		out = append(out, best)
	}
	return out
}

var fuzzZones = []string{"", "eu-1a", "EU-1A", "eu-1b", "eu-1c"}

func FuzzTracker(f *testing.F) {
	f.Add([]byte{2, 1, 3, 1, 3, 0, 0x10, 2, 0x21, 2, 0x30, 3})
	f.Add([]byte{3, 1, 4, 0, 1, 3, 2, 0x00, 1, 0x01, 2, 0x12, 3, 0x02, 2, 0x23, 1})
	f.Add([]byte{0, 0, 2, 0, 0, 0x00, 1, 0x11, 2, 0x20, 4})
	f.Add([]byte{1, 1, 8, 1, 2, 3, 4, 0, 1, 2, 3, 0x05, 2, 0x16, 1, 0x27, 3, 0x30, 4, 0x02, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		target := Target(data[0] % 4)
		clientZone := ""
		if data[1]%2 == 1 {
			clientZone = "eu-1a"
		}
		n := 1 + int(data[2])%8
		data = data[3:]
		if len(data) < n {
			return
		}
		hosts := make([]Host, n)
		m := &model{target: target, zone: clientZone, hosts: make([]modelHost, n)}
		for i := range n {
			z := fuzzZones[int(data[i])%len(fuzzZones)]
			hosts[i] = Host{Addr: fmt.Sprintf("h%d", i), Zone: z}
			m.hosts[i] = modelHost{state: Unknown, zone: z}
		}
		data = data[n:]

		clk := newFakeClock()
		tr := NewTracker(hosts, Options{Target: target, Zone: clientZone, Now: clk.Now})
		prev := tr.Statuses()
		for len(data) >= 2 {
			kind, i, arg := data[0]>>4, int(data[0]&0x0f)%n, data[1]
			data = data[2:]
			now := clk.Advance(time.Second)
			var desc string
			switch kind % 3 {
			case 0:
				r := Role(arg % 3)
				desc = fmt.Sprintf("connect(%d, %v)", i, r)
				tr.ObserveConnect(i, r)
				m.connect(i, r)
			case 1:
				c := Class(arg % 5)
				desc = fmt.Sprintf("fail(%d, %v)", i, c)
				tr.ObserveFailure(i, c)
				m.fail(i, c)
			case 2:
				z := fuzzZones[int(arg)%len(fuzzZones)]
				desc = fmt.Sprintf("zone(%d, %q)", i, z)
				tr.ObserveZone(i, z)
				m.observeZone(i, z)
			}

			got := tr.Statuses()
			for j, h := range got {
				want := m.hosts[j]
				if h.State != want.state || h.Role != want.role || h.Zone != want.zone || h.Tier != m.tier(want.zone) {
					t.Fatalf("after %s: host %d is %v/%v/%q/%v, want %v/%v/%q/%v",
						desc, j, h.State, h.Role, h.Zone, h.Tier, want.state, want.role, want.zone, m.tier(want.zone))
				}
				wantSince := prev[j].Since
				if h.State != prev[j].State {
					wantSince = now
				}
				if !h.Since.Equal(wantSince) {
					t.Fatalf("after %s: host %d Since %v, want %v", desc, j, h.Since, wantSince)
				}
			}
			if r, want := tr.Ranking(), m.ranking(); !slices.Equal(r, want) {
				t.Fatalf("after %s: ranking %v, want %v", desc, r, want)
			}
			if tr.Pick() != tr.Ranking()[0] {
				t.Fatalf("after %s: Pick %d, Ranking %v", desc, tr.Pick(), tr.Ranking())
			}
			if tr.inOutage() != m.outage {
				t.Fatalf("after %s: outage %v, want %v", desc, tr.inOutage(), m.outage)
			}
			prev = got
		}
	})
}
