package hostpool

import (
	"fmt"
	"slices"
	"testing"
)

// TestWaitingStatements: the list keeps each statement once, in the
// order added, up to maxWaitingStatements; its version counts them and
// tells one wait's list from the next; a list handed out stays as it was.
func TestWaitingStatements(t *testing.T) {
	var w waitingStatements
	w.add("")
	w.add("SELECT 1")
	w.add("SELECT 2")
	w.add("SELECT 1")
	v1, got := w.list()
	if want := []string{"SELECT 1", "SELECT 2"}; !slices.Equal(got, want) || statementCount(v1) != 2 {
		t.Fatalf("list = %q at count %d, want %q at 2", got, statementCount(v1), want)
	}
	for i := range 2 * maxWaitingStatements {
		w.add(fmt.Sprintf("SELECT %d", i+3))
	}
	v2, full := w.list()
	if len(full) != maxWaitingStatements || statementCount(v2) != maxWaitingStatements || !sameList(v1, v2) {
		t.Fatalf("full list: %d statements at count %d (same wait %v), want %d of the one wait",
			len(full), statementCount(v2), sameList(v1, v2), maxWaitingStatements)
	}
	w.reset()
	w.add("SELECT 1")
	v3, next := w.list()
	if sameList(v2, v3) || statementCount(v3) != 1 || !slices.Equal(next, []string{"SELECT 1"}) {
		t.Fatalf("after reset: %q at count %d (same wait %v), want one statement of a new wait", next, statementCount(v3), sameList(v2, v3))
	}
	if c := withCount(v3, 5); !sameList(c, v3) || statementCount(c) != 5 {
		t.Errorf("withCount(v3, 5) is of the same list %v at count %d, want true at 5", sameList(c, v3), statementCount(c))
	}
	if !slices.Equal(got, []string{"SELECT 1", "SELECT 2"}) || len(full) != maxWaitingStatements || full[2] != "SELECT 3" {
		t.Errorf("lists handed out changed: %q, %q", got, full)
	}
}
