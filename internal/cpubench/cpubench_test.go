package cpubench

import (
	"errors"
	"sync/atomic"
	"testing"
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

// TestMeasure runs one side's sub-benchmark: both sides run as often as
// each other, and the metrics say which side costs more CPU.
func TestMeasure(t *testing.T) {
	var calls [2]int
	sides := [2]Side{
		{Name: "light", Op: func() error { calls[0]++; sink += spin(10); return nil }},
		{Name: "heavy", Op: func() error { calls[1]++; sink += spin(40); return nil }},
	}
	for me := range 2 {
		calls = [2]int{}
		r := testing.Benchmark(measure(sides, me, 1))
		if r.N == 0 || calls[0] != calls[1] {
			t.Fatalf("me=%d: N=%d, calls %v: want both sides run as often", me, r.N, calls)
		}
		for _, unit := range []string{"cpu-ns/op", "user-ns/op", "sys-ns/op", "cpu-ratio", "cpu-ratio-pooled"} {
			if _, ok := r.Extra[unit]; !ok {
				t.Fatalf("me=%d: no %s in %v", me, unit, r.Extra)
			}
		}
		// The heavy side does four times the light side's work; the
		// ratio is only checked to be well above 1, as other goroutines
		// of this process count too.
		for _, unit := range []string{"cpu-ratio", "cpu-ratio-pooled"} {
			if ratio := r.Extra[unit]; ratio < 1.5 {
				t.Errorf("me=%d: %s %.2f, want the heavy side to cost more", me, unit, ratio)
			}
		}
		if r.Extra["cpu-ns/op"] <= 0 {
			t.Errorf("me=%d: cpu-ns/op %v", me, r.Extra["cpu-ns/op"])
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
