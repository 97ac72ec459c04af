package cpubench

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The tests run benchmarks through testing.Benchmark, which runs each
	// for -test.benchtime (1s unless given): a fixed count of iterations
	// is enough to check what Compare does, and keeps the tests short.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.benchtime" })
	if !set {
		if err := flag.Set("test.benchtime", "200x"); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
