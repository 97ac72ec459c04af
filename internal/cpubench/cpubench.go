package cpubench

import (
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Side is one side of a comparison: the sub-benchmark's name (for
// example "pool=pgxpool", so that `benchstat -col /pool` sets the sides
// side by side) and one operation.
type Side struct {
	Name string
	Op   func() error
}

// Round is how many operations one side runs, per goroutine, before the
// other takes over.
const Round = 50

// Compare runs a sub-benchmark for each side, sides[0]'s first. Each
// reports its own side's cpu-ns/op (user+sys of this process: the server
// runs in others), user-ns/op and sys-ns/op beside the usual metrics
// (ns/op, B/op and allocs/op are its own side's alone), and two ratios
// of the CPU time of sides[1] over that of sides[0] in its interleaved
// rounds: cpu-ratio, the median of the rounds' ratios, which a round hit
// by something else on the machine (a neighbour's burst, a collection of
// the whole heap) does not move, and cpu-ratio-pooled, the ratio of the
// sums over all rounds, which such a round can.
//
// cpu-ratio does not depend on which side goes first: each sub-benchmark
// runs a round of the other side after each of its own, so the two CPU
// times it compares come from the same stretch of time. (Under -count,
// testing repeats each sub-benchmark in place, all the counts of sides[0]
// before those of sides[1], so no order could alternate between counts.)
func Compare(b *testing.B, sides [2]Side) { CompareParallel(b, sides, 1) }

// CompareParallel is Compare with each round run by goroutines goroutines
// at once, as b.RunParallel with that parallelism would run them: the
// operations of a round are shared out among them, and a round ends when
// all have finished. ns/op is wall time per operation, so under load it
// falls as goroutines are added until something is saturated; cpu-ns/op
// is the whole process's CPU per operation, including what the
// goroutines spend waiting for each other (a lock, a pool's queue).
// Operations run concurrently, so Op must be safe for concurrent use.
// goroutines 1 runs the operations on the benchmark's own goroutine.
func CompareParallel(b *testing.B, sides [2]Side, goroutines int) {
	goroutines = max(goroutines, 1)
	b.Run(sides[0].Name, measure(sides, 0, goroutines))
	b.Run(sides[1].Name, measure(sides, 1, goroutines))
}

// measure returns the sub-benchmark of sides[me].
func measure(sides [2]Side, me, goroutines int) func(*testing.B) {
	other := 1 - me
	round := Round * goroutines
	return func(b *testing.B) {
		// Connect and warm both sides outside the measurement.
		run(b, sides[me].Op, round, goroutines)
		run(b, sides[other].Op, round, goroutines)
		b.ReportAllocs()
		var user, sys time.Duration
		var cpu [2]time.Duration
		var ratios []float64 // sides[1]'s CPU over sides[0]'s, per round
		b.ResetTimer()
		for done := 0; done < b.N; {
			n := min(round, b.N-done)
			u0, s0 := cpuTime(b)
			if err := runOps(sides[me].Op, n, goroutines); err != nil {
				b.Fatal(err)
			}
			u1, s1 := cpuTime(b)
			user += u1 - u0
			sys += s1 - s0
			var round [2]time.Duration
			round[me] = u1 - u0 + s1 - s0
			done += n
			b.StopTimer()
			round[other] = run(b, sides[other].Op, n, goroutines)
			cpu[0] += round[0]
			cpu[1] += round[1]
			if round[0] > 0 && round[1] > 0 {
				ratios = append(ratios, float64(round[1])/float64(round[0]))
			}
			b.StartTimer()
		}
		b.StopTimer()
		b.ReportMetric(float64(user+sys)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(user)/float64(b.N), "user-ns/op")
		b.ReportMetric(float64(sys)/float64(b.N), "sys-ns/op")
		b.ReportMetric(median(ratios), "cpu-ratio")
		b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "cpu-ratio-pooled")
	}
}

// median returns the median of xs (which it sorts), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

// run runs op n times on goroutines goroutines and returns the CPU time
// it took.
func run(b *testing.B, op func() error, n, goroutines int) time.Duration {
	u0, s0 := cpuTime(b)
	if err := runOps(op, n, goroutines); err != nil {
		b.Fatal(err)
	}
	u1, s1 := cpuTime(b)
	return u1 - u0 + s1 - s0
}

// runOps runs op n times in all, shared out among goroutines goroutines
// (the caller's own when 1), and returns the first error.
func runOps(op func() error, n, goroutines int) error {
	if goroutines == 1 {
		for range n {
			if err := op(); err != nil {
				return err
			}
		}
		return nil
	}
	var left atomic.Int64
	left.Store(int64(n))
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := op(); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// cpuTime returns the CPU time, user and system, this process has used so
// far. It is a variable so that the package's tests can check the
// arithmetic on a clock of their own: what the real clock reads depends on
// the machine and everything else running on it.
var cpuTime = processCPUTime

func processCPUTime(b *testing.B) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
