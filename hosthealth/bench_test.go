package hosthealth

import (
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

var benchSizes = []int{3, 16, 64}

func benchAddr(i int) string { return fmt.Sprintf("10.0.%d.%d:5432", i/250, i%250) }

// benchHosts returns n hosts in three zones.
func benchHosts(n int) []HostSpec {
	hosts := make([]HostSpec, n)
	for i := range hosts {
		hosts[i] = HostSpec{Addr: benchAddr(i), Zone: fmt.Sprintf("eu-1%c", 'a'+i%3)}
	}
	return hosts
}

// benchTracker returns a tracker over n hosts in three zones, with a mix
// of states and roles so that no ranking is trivial.
func benchTracker(n int) *tracker {
	tr := newTracker(benchHosts(n), Options{Zone: "eu-1b"})
	for i := range n {
		switch i % 4 {
		case 0:
			tr.ObserveFailure(benchAddr(i), Transport)
		case 1, 2:
			tr.ObserveConnect(benchAddr(i), RoleReplica)
		case 3:
			tr.ObserveConnect(benchAddr(i), RolePrimary)
		}
	}
	return tr
}

func BenchmarkPick(b *testing.B) {
	for _, n := range benchSizes {
		tr := benchTracker(n)
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tr.Snapshot().Pick(TargetReplica)
			}
		})
	}
}

func BenchmarkPickParallel(b *testing.B) {
	for _, n := range benchSizes {
		tr := benchTracker(n)
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				sum := 0
				for pb.Next() {
					sum += tr.Snapshot().Pick(TargetReplica)
				}
				if sum < 0 {
					b.Error("negative pick")
				}
			})
		})
	}
}

// BenchmarkPickUsable measures what a call does before it dials: take the
// snapshot, pick, and check that the host can take the call.
func BenchmarkPickUsable(b *testing.B) {
	for _, n := range benchSizes {
		tr := benchTracker(n)
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := tr.Snapshot()
				if i := s.Pick(TargetAny); i < 0 || !s.Usable(i, TargetAny) {
					b.Fatal("no usable host")
				}
			}
		})
	}
}

func BenchmarkRanking(b *testing.B) {
	for _, n := range benchSizes {
		tr := benchTracker(n)
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := tr.Snapshot()
				for _, i := range s.Ranking(TargetPreferReplica) {
					if !s.Usable(i, TargetPreferReplica) {
						break
					}
				}
			}
		})
	}
}

// BenchmarkObserveChange measures a write that changes a host's state and
// so rebuilds the snapshot, with every target's ranking.
func BenchmarkObserveChange(b *testing.B) {
	for _, n := range benchSizes {
		tr := benchTracker(n)
		addr := benchAddr(1)
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				if k%2 == 0 {
					tr.ObserveFailure(addr, Transport)
				} else {
					tr.ObserveConnect(addr, RoleReplica)
				}
				k++
			}
		})
	}
}

// BenchmarkObserveUnchanged measures the common case of reporting a
// success on a host that is already Healthy.
func BenchmarkObserveUnchanged(b *testing.B) {
	tr := benchTracker(16)
	addr := benchAddr(1)
	b.ReportAllocs()
	for b.Loop() {
		tr.ObserveConnect(addr, RoleReplica)
	}
}

// BenchmarkSetHosts measures a topology update that keeps every host.
func BenchmarkSetHosts(b *testing.B) {
	for _, n := range benchSizes {
		tr := benchTracker(n)
		hosts := benchHosts(n)
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tr.SetHosts(hosts)
			}
		})
	}
}

func BenchmarkClassify(b *testing.B) {
	errs := map[string]error{
		"pgerror":   fmt.Errorf("exec: %w", &pgconn.PgError{Code: "23505"}),
		"eof":       io.ErrUnexpectedEOF,
		"role":      fmt.Errorf("check: %w", &RoleError{Addr: "a:5432", Role: RoleReplica}),
		"unrelated": fmt.Errorf("scan: %w", io.ErrShortBuffer),
	}
	for _, name := range []string{"pgerror", "eof", "role", "unrelated"} {
		err := errs[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Classify(err)
			}
		})
	}
}
