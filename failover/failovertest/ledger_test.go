package failovertest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pgfailover/pgfailover/failover"
)

func TestWriteResultOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want WriteResult
	}{
		{nil, Acknowledged},
		{failover.ErrCommitOutcomeUnknown, Unknown},
		{fmt.Errorf("placing order 7: %w", failover.ErrCommitOutcomeUnknown), Unknown},
		{failover.ErrTxInterrupted, Failed},
		{failover.ErrNoHost, Failed},
		{errors.New("duplicate key"), Failed},
	} {
		if got := WriteResultOf(tc.err); got != tc.want {
			t.Errorf("WriteResultOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if got, want := WriteResult(7).String(), "WriteResult(7)"; got != want {
		t.Errorf("WriteResult(7).String() = %q, want %q", got, want)
	}
}

// TestJudge is the ledger's decision, key by key: what the writes of a key
// returned and how many rows hold it, against the verdict.
func TestJudge(t *testing.T) {
	type row struct {
		writes  []error
		present int64
	}
	unknown := failover.ErrCommitOutcomeUnknown
	failed := failover.ErrNoHost
	for _, tc := range []struct {
		name string
		row  row
		want string // the list the key lands in, or "ok"
		// count is the verdict's counter that must be 1.
		count string
	}{
		{"acknowledged, present once", row{[]error{nil}, 1}, "ok", "acknowledged"},
		{"acknowledged, missing", row{[]error{nil}, 0}, "missing", "acknowledged"},
		{"acknowledged, twice", row{[]error{nil}, 2}, "duplicated", "acknowledged"},
		{"unknown, absent", row{[]error{unknown}, 0}, "ok", "unknown"},
		{"unknown, committed", row{[]error{unknown}, 1}, "ok", "unknown committed"},
		{"unknown, twice", row{[]error{unknown}, 2}, "duplicated", "unknown committed"},
		{"failed, absent", row{[]error{failed}, 0}, "ok", "failed"},
		{"failed, present", row{[]error{failed}, 1}, "failed present", "failed"},
		{"unknown then acknowledged retry, once", row{[]error{unknown, nil}, 1}, "ok", "acknowledged"},
		{"unknown then acknowledged retry, missing", row{[]error{unknown, nil}, 0}, "missing", "acknowledged"},
		{"unknown then acknowledged retry, twice", row{[]error{unknown, nil}, 2}, "duplicated", "acknowledged"},
		{"failed then unknown, committed", row{[]error{failed, unknown}, 1}, "ok", "unknown committed"},
		{"failed twice, absent", row{[]error{failed, failed}, 0}, "ok", "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l Ledger[string]
			for _, err := range tc.row.writes {
				l.Record("k", err)
			}
			present := map[string]int64{}
			if tc.row.present > 0 {
				present["k"] = tc.row.present
			}
			v := l.tally(present)
			lists := map[string][]string{"missing": v.Missing, "duplicated": v.Duplicated, "failed present": v.FailedPresent}
			for name, keys := range lists {
				if want := name == tc.want; want != slices.Contains(keys, "k") {
					t.Errorf("key in %s: %v, want %v (%+v)", name, !want, want, v)
				}
			}
			if v.OK() != (tc.want == "ok") {
				t.Errorf("OK() = %v (%+v)", v.OK(), v)
			}
			counts := map[string]int{"acknowledged": v.Acknowledged, "unknown": v.Unknown - v.UnknownCommitted,
				"unknown committed": v.UnknownCommitted, "failed": v.Failed}
			for name, n := range counts {
				if want := map[bool]int{true: 1}[name == tc.count]; n != want {
					t.Errorf("%s = %d, want %d (%+v)", name, n, want, v)
				}
			}
			if v.Unrecorded != 0 {
				t.Errorf("Unrecorded = %d, want 0", v.Unrecorded)
			}
		})
	}
}

func TestJudgeUnrecordedAndCounts(t *testing.T) {
	var l Ledger[int64]
	l.Record(1, nil)
	l.Record(2, failover.ErrCommitOutcomeUnknown)
	l.Record(2, nil)
	l.Record(3, failover.ErrNoHost)
	if got := [3]int{l.Count(Acknowledged), l.Count(Unknown), l.Count(Failed)}; got != [3]int{2, 1, 1} {
		t.Errorf("counts by write = %v, want [2 1 1]", got)
	}
	v := l.tally(map[int64]int64{1: 1, 2: 1, 40: 1, 41: 3})
	if !v.OK() || v.Unrecorded != 2 || v.Acknowledged != 2 || v.Failed != 1 {
		t.Errorf("verdict %+v, want OK with 2 acknowledged, 1 failed, 2 unrecorded", v)
	}
}

func TestMismatchNamesKeys(t *testing.T) {
	var l Ledger[int64]
	for k := int64(1); k <= 15; k++ {
		l.Record(k, nil)
	}
	l.Record(99, failover.ErrNoHost)
	v := l.tally(map[int64]int64{3: 2, 99: 1})
	err := v.err("orders", "id")
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("err = %v, want ErrMismatch", err)
	}
	for _, want := range []string{"orders.id", "acknowledged but missing: 1, 2, 4,", "and 4 more",
		"applied more than once: 3", "reported failed but present: 99"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}
