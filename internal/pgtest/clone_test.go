package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// withoutTools returns a directory holding only postgres and initdb, as
// links to the programs New finds: the shape of a server build without
// pg_basebackup and pg_rewind.
func withoutTools(t *testing.T) string {
	t.Helper()
	b, err := cachedBinaries(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	// Under os.TempDir(), readable by the postgres user when we are root.
	dir, err := os.MkdirTemp(os.TempDir(), fmt.Sprintf("%s%d-bin-", dirPrefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range programs {
		if err := os.Symlink(filepath.Join(b.dir, p), filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestFailoverDivergedWithoutTools: with neither pg_basebackup nor
// pg_rewind, the replicas are copies taken between pg_backup_start and
// pg_backup_stop, and the diverged servers are copied afresh.
func TestFailoverDivergedWithoutTools(t *testing.T) {
	skipUnderShort(t)
	t.Parallel()
	c := Start(t, Options{Replicas: 2, BinDir: withoutTools(t)})
	if c.bins.basebackup || c.bins.rewind {
		t.Fatalf("%s: pg_basebackup found %v, pg_rewind found %v; want neither", c.bins.dir, c.bins.basebackup, c.bins.rewind)
	}
	for _, r := range c.Nodes()[1:] {
		// The server renames the backup_label it started from.
		if _, err := os.Stat(filepath.Join(r.DataDir(), "backup_label.old")); err != nil {
			t.Errorf("%s was not started from a backup_label: %v", r.Name(), err)
		}
	}
	failoverDiverged(t, c)
}

func TestLeftOut(t *testing.T) {
	for _, tc := range []struct {
		rel  string
		dir  bool
		want bool
	}{
		{"base", true, false},
		{"base/5/1259", false, false},
		{"global/pg_control", false, false},
		{"postgresql.auto.conf", false, false},
		{"pg_wal", true, false},
		{"pg_wal/archive_status", true, false},
		{"pg_wal/summaries", true, false},
		{"pg_wal/000000010000000000000003", false, true},
		{"pg_wal/archive_status/000000010000000000000002.done", false, true},
		{"postmaster.pid", false, true},
		{"postmaster.opts", false, true},
		{"backup_label", false, true},
		{"base/backup_label", false, false},
		{"pg_replslot", true, false},
		{"pg_replslot/slot1", true, true},
		{"pg_stat_tmp/global.stat", false, true},
		{"pg_subtrans/0000", false, true},
		{"global/pg_internal.init", false, true},
		{"base/5/pg_internal.init.1234", false, true},
		{"base/pgsql_tmp", true, true},
	} {
		if got := leftOut(tc.rel, tc.dir); got != tc.want {
			t.Errorf("leftOut(%q, dir=%v) = %v, want %v", tc.rel, tc.dir, got, tc.want)
		}
	}
}
