package pgtest

import "testing"

// skipLong skips a long test (a drill, a soak, a cluster of its own)
// under -short, and names the command that runs it. go test -short ./...
// is the fast loop; go test -race ./... runs everything.
func skipLong(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skipf("long test; run: go test -race -run '^%s$' ./internal/pgtest/", t.Name())
	}
}
