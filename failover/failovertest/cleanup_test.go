package failovertest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgfailover/pgfailover/failover/failovertest"
)

// TestNothingLeftBehind runs alone (not parallel): once the test that
// started a cluster has ended, nothing of the test process is left in the
// temporary directory, the initdb template that clusters copy included,
// and the servers' logs are gone with it.
func TestNothingLeftBehind(t *testing.T) {
	var nodes []*failovertest.Node
	t.Run("cluster", func(t *testing.T) {
		c := failovertest.Start(t, failovertest.Replicas(1), failovertest.SyncReplication())
		nodes = c.Nodes()
		if nodes[0].LogTail(1000) == "" {
			t.Error("node0's log is empty")
		}
	})
	pattern := filepath.Join(os.TempDir(), fmt.Sprintf("pgtest-%d-*", os.Getpid()))
	if left, _ := filepath.Glob(pattern); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	for _, n := range nodes {
		if log := n.LogTail(1000); log != "" {
			t.Errorf("%s: its log is still there once the cluster is closed:\n%s", n, log)
		}
	}
}
