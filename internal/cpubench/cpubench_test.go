package cpubench

import (
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// spin burns CPU in proportion to n.
func spin(n int) uint64 {
	x := uint64(n)
	for i := range n * 1000 {
		x = x*6364136223846793005 + uint64(i)
	}
	return x
}

var sink uint64

// TestCompare runs Compare: a sub-benchmark for each side, sides[0]'s
// first, each of which also runs the other side.
func TestCompare(t *testing.T) {
	var order []string
	var calls [2]int
	side := func(i int, name string) Side {
		return Side{Name: name, Op: func() error {
			if len(order) == 0 || order[len(order)-1] != name {
				order = append(order, name)
			}
			calls[i]++
			return nil
		}}
	}
	testing.Benchmark(func(b *testing.B) { Compare(b, [2]Side{side(0, "a"), side(1, "b")}) })
	if len(order) == 0 || order[0] != "a" {
		t.Fatalf("sides ran in the order %v, want a first", order)
	}
	if calls[0] == 0 || calls[0] != calls[1] {
		t.Fatalf("calls %v: want both sides run, as often as each other", calls)
	}
}

// fakeCPU is a CPU clock the operations advance themselves, so that the
// metrics can be checked exactly: the real clock counts whatever else the
// process and the machine do meanwhile.
type fakeCPU struct{ user, sys atomic.Int64 }

func (c *fakeCPU) spend(user, sys time.Duration) {
	c.user.Add(int64(user))
	c.sys.Add(int64(sys))
}

func (c *fakeCPU) read(*testing.B) (user, sys time.Duration) {
	return time.Duration(c.user.Load()), time.Duration(c.sys.Load())
}

// useCPUClock makes the measurements read clock until the test ends.
func useCPUClock(t *testing.T, clock func(*testing.B) (time.Duration, time.Duration)) {
	saved := cpuTime
	cpuTime = clock
	t.Cleanup(func() { cpuTime = saved })
}

// TestMeasure runs each side's sub-benchmark on a CPU clock the sides
// advance by known amounts, the heavy side four times the light one's:
// both sides run as often as each other, each reports its own CPU per
// operation, and both ratios are the heavy side's over the light one's,
// whichever side the sub-benchmark is and however many goroutines run a
// round.
func TestMeasure(t *testing.T) {
	var clock fakeCPU
	useCPUClock(t, clock.read)
	var calls [2]atomic.Int64
	sides := [2]Side{
		{Name: "light", Op: func() error { calls[0].Add(1); clock.spend(1000, 250); return nil }},
		{Name: "heavy", Op: func() error { calls[1].Add(1); clock.spend(4000, 1000); return nil }},
	}
	want := [2]map[string]float64{
		{"cpu-ns/op": 1250, "user-ns/op": 1000, "sys-ns/op": 250, "cpu-ratio": 4, "cpu-ratio-pooled": 4},
		{"cpu-ns/op": 5000, "user-ns/op": 4000, "sys-ns/op": 1000, "cpu-ratio": 4, "cpu-ratio-pooled": 4},
	}
	for _, goroutines := range []int{1, 3} {
		for me := range 2 {
			calls[0].Store(0)
			calls[1].Store(0)
			r := testing.Benchmark(measure(sides, me, goroutines))
			if r.N == 0 || calls[0].Load() != calls[1].Load() {
				t.Fatalf("goroutines=%d me=%d: N=%d, calls %d and %d: want both sides run as often",
					goroutines, me, r.N, calls[0].Load(), calls[1].Load())
			}
			for unit, v := range want[me] {
				if got, ok := r.Extra[unit]; !ok || got != v {
					t.Errorf("goroutines=%d me=%d: %s = %v (reported: %v), want %v", goroutines, me, unit, got, ok, v)
				}
			}
		}
	}
}

// TestMeasureRealClock runs both sides on the process's real CPU clock,
// whose readings depend on the machine: every metric is there, finite and
// not negative, and user and system time add up to the CPU time. Which side
// costs more is a benchmark's to report, not a test's to assert.
func TestMeasureRealClock(t *testing.T) {
	sides := [2]Side{
		{Name: "light", Op: func() error { sink += spin(10); return nil }},
		{Name: "heavy", Op: func() error { sink += spin(40); return nil }},
	}
	for me := range 2 {
		r := testing.Benchmark(measure(sides, me, 1))
		if r.N == 0 {
			t.Fatalf("me=%d: the benchmark did not run", me)
		}
		for _, unit := range []string{"cpu-ns/op", "user-ns/op", "sys-ns/op", "cpu-ratio", "cpu-ratio-pooled"} {
			v, ok := r.Extra[unit]
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Errorf("me=%d: %s = %v (reported: %v), want a finite number >= 0", me, unit, v, ok)
			}
		}
		cpu, sum := r.Extra["cpu-ns/op"], r.Extra["user-ns/op"]+r.Extra["sys-ns/op"]
		if cpu <= 0 || math.Abs(cpu-sum) > 1e-9*cpu {
			t.Errorf("me=%d: cpu-ns/op %v, user-ns/op + sys-ns/op %v", me, cpu, sum)
		}
	}
}

// TestMeasureFails checks that an error from either side fails the
// benchmark.
func TestMeasureFails(t *testing.T) {
	boom := errors.New("boom")
	for bad := range 2 {
		sides := [2]Side{{Name: "a", Op: func() error { return nil }}, {Name: "b", Op: func() error { return nil }}}
		sides[bad].Op = func() error { return boom }
		if r := testing.Benchmark(measure(sides, 0, 1)); r.N != 0 {
			t.Errorf("side %d failing: the benchmark ran %d times, want it failed", bad, r.N)
		}
	}
}

// TestCompareParallel runs each round on several goroutines: both sides
// still run as often as each other, and an error fails the benchmark.
func TestCompareParallel(t *testing.T) {
	var calls [2]atomic.Int64
	sides := [2]Side{
		{Name: "a", Op: func() error { calls[0].Add(1); return nil }},
		{Name: "b", Op: func() error { calls[1].Add(1); return nil }},
	}
	r := testing.Benchmark(measure(sides, 0, 8))
	if r.N == 0 || calls[0].Load() != calls[1].Load() {
		t.Fatalf("N=%d, calls %d and %d: want both sides run as often", r.N, calls[0].Load(), calls[1].Load())
	}
	sides[1].Op = func() error { return errors.New("boom") }
	if r := testing.Benchmark(measure(sides, 0, 8)); r.N != 0 {
		t.Errorf("a side failing on 8 goroutines: the benchmark ran %d times, want it failed", r.N)
	}
}

// TestMedian: the middle value, the mean of the middle two, 0 for none.
func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1, 1, 9, 1000}, 5},
	} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
