package hosthealth

import (
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

var benchSizes = []int{3, 16, 64}

// benchTracker returns a replica tracker over n hosts in three zones, with
// a mix of states so that the ranking is not trivial.
func benchTracker(n int) *Tracker {
	hosts := make([]Host, n)
	for i := range hosts {
		hosts[i] = Host{Addr: fmt.Sprintf("10.0.%d.%d:5432", i/250, i%250), Zone: fmt.Sprintf("eu-1%c", 'a'+i%3)}
	}
	tr := NewTracker(hosts, Options{Target: TargetReplica, Zone: "eu-1b"})
	for i := range n {
		switch i % 4 {
		case 0:
			tr.ObserveFailure(i, Transport)
		case 1, 2:
			tr.ObserveConnect(i, RoleReplica)
		case 3:
			tr.ObserveConnect(i, RolePrimary)
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
				tr.Pick()
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
					sum += tr.Pick()
				}
				if sum < 0 {
					b.Error("negative pick")
				}
			})
		})
	}
}

// BenchmarkPickWhileObserving measures Pick from parallel readers while
// one goroutine keeps changing a host's state, so that every few reads
// see a freshly published snapshot.
func BenchmarkPickWhileObserving(b *testing.B) {
	for _, n := range benchSizes {
		tr := benchTracker(n)
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					default:
					}
					if k%2 == 0 {
						tr.ObserveFailure(1, Transport)
					} else {
						tr.ObserveConnect(1, RoleReplica)
					}
				}
			}()
			b.RunParallel(func(pb *testing.PB) {
				sum := 0
				for pb.Next() {
					sum += tr.Pick()
				}
				if sum < 0 {
					b.Error("negative pick")
				}
			})
			close(stop)
			wg.Wait()
		})
	}
}

func BenchmarkRanking(b *testing.B) {
	for _, n := range benchSizes {
		tr := benchTracker(n)
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, i := range tr.Ranking() {
					if i < 0 {
						b.Fatal("negative index")
					}
				}
			}
		})
	}
}

// BenchmarkObserveChange measures a write that changes a host's state and
// so rebuilds the snapshot.
func BenchmarkObserveChange(b *testing.B) {
	for _, n := range benchSizes {
		tr := benchTracker(n)
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				if k%2 == 0 {
					tr.ObserveFailure(1, Transport)
				} else {
					tr.ObserveConnect(1, RoleReplica)
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
	b.ReportAllocs()
	for b.Loop() {
		tr.ObserveConnect(1, RoleReplica)
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
