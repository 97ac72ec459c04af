package stalecheck

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps what AfterWrite says. Its Fatal
// and Fatalf end the goroutine, as testing's do.
type recorder struct {
	testing.TB
	fatal, log string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) {
	r.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Logf(format string, args ...any) { r.log = fmt.Sprintf(format, args...) }

// run runs AfterWrite on a recorder, and returns the recorder and how
// many reads it made. A check still reading after ten seconds fails.
func run(wrote time.Time, maxLag time.Duration, read func() (int, error)) (*recorder, int) {
	r := new(recorder)
	reads := 0
	done := make(chan struct{})
	deadline := time.Now().Add(10 * time.Second)
	go func() {
		defer close(done)
		AfterWrite(r, wrote, maxLag, 1, func() (int, error) {
			if time.Now().After(deadline) {
				r.Fatalf("still reading after %d reads", reads)
			}
			reads++
			return read()
		})
	}()
	<-done
	return r, reads
}

// TestAfterWrite: reads begun past maxLag must not return the old value,
// and 20 of them are made; reads begun within it may; an error of the
// read fails the check.
func TestAfterWrite(t *testing.T) {
	past := time.Now().Add(-time.Hour)

	r, reads := run(past, time.Second, func() (int, error) { return 2, nil })
	if r.fatal != "" || reads != checked {
		t.Errorf("fresh reads: failed %q after %d reads, want no failure after %d", r.fatal, reads, checked)
	}
	if want := "reads begun within max_lag of the write: 0, 0 of them on a lagging replica (allowed); 20 reads after it, none stale"; r.log != want {
		t.Errorf("fresh reads logged %q, want %q", r.log, want)
	}

	r, reads = run(past, time.Second, func() (int, error) { return 1, nil })
	if !strings.HasPrefix(r.fatal, "a read begun ") || !strings.HasSuffix(r.fatal, " after the write returned read the old value (max_lag 1s)") || reads != 1 {
		t.Errorf("a stale read: failed %q after %d reads, want the old value reported after 1", r.fatal, reads)
	}

	r, _ = run(past, time.Second, func() (int, error) { return 0, errors.New("no connection") })
	if r.fatal != "no connection" {
		t.Errorf("a failed read: failed %q, want the read's error", r.fatal)
	}

	// A read that returns the old value only while maxLag has not passed
	// since wrote was begun within the bound, however late it ran; each
	// such read is counted as one on a lagging replica.
	const maxLag = 10 * time.Millisecond
	wrote := time.Now()
	olds := 0
	r, _ = run(wrote, maxLag, func() (int, error) {
		if time.Since(wrote) <= maxLag {
			olds++
			return 1, nil
		}
		return 2, nil
	})
	if want := fmt.Sprintf(", %d of them on a lagging replica (allowed); 20 reads after it, none stale", olds); r.fatal != "" || !strings.Contains(r.log, want) {
		t.Errorf("old values within max_lag: failed %q, logged %q; want no failure, and a log saying %q", r.fatal, r.log, want)
	}
}
