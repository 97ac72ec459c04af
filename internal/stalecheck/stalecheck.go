package stalecheck

import (
	"testing"
	"time"
)

// checked is how many reads begun past wrote+maxLag AfterWrite makes.
const checked = 20

// AfterWrite reads with read until 20 of the reads it began more than
// maxLag after wrote have returned, and fails t if any of those returned
// old: wrote is when a write that replaced old returned, taken as soon as
// it did. Reads begun within maxLag of wrote may return old; it logs how
// many did. An error of read fails t.
//
// The write was acknowledged before wrote, and each read is made after
// AfterWrite took the time it began. A slow machine only makes wrote
// later, and a read's start earlier, than what they stand for: it can
// spare a read the check, never fail one the bound allows. So the
// threshold is maxLag itself, with no allowance for scheduling.
func AfterWrite(t testing.TB, wrote time.Time, maxLag time.Duration, old int, read func() (int, error)) {
	t.Helper()
	var early, earlyOld, late int
	for late < checked {
		began := time.Now()
		v, err := read()
		if err != nil {
			t.Fatal(err)
		}
		if began.Sub(wrote) <= maxLag {
			early++
			if v == old {
				earlyOld++
			}
			continue
		}
		late++
		if v == old {
			t.Fatalf("a read begun %v after the write returned read the old value (max_lag %v)", began.Sub(wrote), maxLag)
		}
	}
	t.Logf("reads begun within max_lag of the write: %d, %d of them on a lagging replica (allowed); %d reads after it, none stale", early, earlyOld, late)
}
