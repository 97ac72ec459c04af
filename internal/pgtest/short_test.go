package pgtest

import "testing"

// skipUnderShort skips, under -short, a test the fast loop leaves out (the
// soak, the Patroni clusters, the long drills, and the integration tests
// beyond the slice that -short keeps), and names the command that runs it.
// go test -short ./... is the fast loop; go test -race ./... runs them all.
func skipUnderShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipped under -short; run: go test -race -run '^%s$' ./internal/pgtest/", t.Name())
	}
}
