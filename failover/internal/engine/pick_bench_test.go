package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/internal/clock"
)

// pickEngine builds, in memory and without servers, an Engine with n hosts as
// far as call.pick looks at it: the routing state and the picker for
// target. Every host has answered: the last one is the primary, the others
// are replicas, so that for TargetPrimary the best host is the last one
// configured.
func pickEngine(b *testing.B, n int, target hosthealth.Target) *Engine {
	hosts := make([]hosthealth.HostSpec, n)
	for i := range hosts {
		hosts[i] = hosthealth.HostSpec{Addr: fmt.Sprintf("db-%d.pg.example.internal:5432", i)}
	}
	e := &Engine{
		Settings: Settings{Target: target},
		Clock:    clock.Real(),
		Steer:    NoSteer{},
	}
	newMemState(e)
	setMemHosts(e, hosts, nil)
	for i, h := range hosts {
		role := hosthealth.RoleReplica
		if i == n-1 {
			role = hosthealth.RolePrimary
		}
		memAnswer(e, h.Addr, role)
	}
	return e
}

// BenchmarkPick measures the host pick of a call on the happy path (no
// failure yet): a snapshot, the target's ranking, the best host's
// usability and its pool by address. The ranking is precomputed, so the
// cost should not grow with the number of hosts, nor under RunParallel,
// where every goroutine reads the same snapshot and table.
//
//	go test -run '^$' -bench Pick -count 10 ./failover/
func BenchmarkPick(b *testing.B) {
	ctx := context.Background()
	for _, target := range []hosthealth.Target{hosthealth.TargetPrimary, hosthealth.TargetPreferReplica} {
		for _, n := range []int{3, 16, 64} {
			e := pickEngine(b, n, target)
			want := e.State.Routes().Table.List[n-1]
			if target == hosthealth.TargetPreferReplica {
				want = e.State.Routes().Table.List[0]
			}
			name := fmt.Sprintf("target=%s/hosts=%d", target, n)
			b.Run(name+"/serial", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var c call
					e.startCall(&c, ctx)
					if h, err := c.pick(); err != nil || h != want {
						b.Fatal(h.Addr, err)
					}
				}
			})
			b.Run(name+"/parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						var c call
						e.startCall(&c, ctx)
						if h, err := c.pick(); err != nil || h != want {
							b.Error(h.Addr, err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkPickHeldBack measures a pick after the call failed on the best
// host, whose re-send waits for the backoff: the pick reads the clock once
// for it and takes the next host. This is the retry path, not the happy
// one.
func BenchmarkPickHeldBack(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{3, 16, 64} {
		e := pickEngine(b, n, hosthealth.TargetPreferReplica)
		list := e.State.Routes().Table.List
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			failed := []string{list[0].Addr}
			notBefore := e.Clock.Now().Add(1 << 62)
			for b.Loop() {
				var c call
				e.startCall(&c, ctx)
				c.events().failed, c.events().notBefore = failed, notBefore
				if h, err := c.pick(); err != nil || h != list[1] {
					b.Fatal(h.Addr, err)
				}
			}
		})
	}
}

// BenchmarkPolicy measures what a statement's policy costs on the happy
// path: every call needs it on success too (execPolicy; a statement seen
// before is looked up, not classified again), and a write is noted
// (noteWrite reads the clock).
func BenchmarkPolicy(b *testing.B) {
	ctx := context.Background()
	e := &Engine{Clock: clock.Real()}
	for _, sql := range []string{"SELECT 1", "INSERT INTO bench_exec (v) VALUES ($1)"} {
		b.Run("execPolicy/sql="+sql, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.classes.execPolicy(ctx, sql)
			}
		})
	}
	b.Run("noteWrite", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e.noteWrite()
		}
	})
}
