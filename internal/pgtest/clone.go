package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// clone fills the new data directory of the stopped node r with a base
// backup of the running primary p: with pg_basebackup when the binaries
// have it, else with copyOnline. r streams the WAL it still needs from p
// once configured as its standby and started.
func (c *Cluster) clone(ctx context.Context, r, p *Node) error {
	if err := c.bins.mkdirOwned(r.dataDir, 0o700); err != nil {
		return fmt.Errorf("pgtest: %s: %w", r.name, err)
	}
	if !c.bins.basebackup {
		return c.copyOnline(ctx, r, p)
	}
	_, err := c.bins.run(ctx, r.dir, basebackupTool, "-D", r.dataDir,
		"-h", "127.0.0.1", "-p", strconv.Itoa(p.port), "-U", "postgres", "-w",
		"-X", "stream", "--checkpoint=fast", "--no-sync")
	if err != nil {
		return fmt.Errorf("pgtest: %s: base backup of %s: %w", r.name, p.name, err)
	}
	return nil
}

// Backup functions: pg_backup_start and pg_backup_stop from PostgreSQL 15,
// pg_start_backup and pg_stop_backup (non-exclusive) before.
const (
	backupStartSQL   = "SELECT pg_backup_start($1, true)"
	backupStopSQL    = "SELECT lsn::text, labelfile, spcmapfile FROM pg_backup_stop(false)"
	backupStartSQL14 = "SELECT pg_start_backup($1, true, false)"
	backupStopSQL14  = "SELECT lsn::text, labelfile, spcmapfile FROM pg_stop_backup(false, false)"
)

// copyOnline takes a base backup of p into r's empty data directory
// without pg_basebackup: on one session of p it starts a backup (with an
// immediate checkpoint), copies p's data directory file by file as
// pg_basebackup would (see leftOut), stops the backup and writes the
// backup_label and tablespace_map it returns. The copy holds no WAL.
func (c *Cluster) copyOnline(ctx context.Context, r, p *Node) error {
	fail := func(err error) error { return p.errorf("copy for %s: %w", r.name, err) }
	conn, err := p.Connect(ctx)
	if err != nil {
		return err
	}
	// Closing the session also ends a backup left running by an error.
	defer conn.Close(context.Background())
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return fail(err)
	}
	start, stop := backupStartSQL, backupStopSQL
	if version < 150000 {
		start, stop = backupStartSQL14, backupStopSQL14
	}
	if _, err := conn.Exec(ctx, start, "pgtest copy for "+r.name); err != nil {
		return fail(err)
	}
	if err := copyTree(c.bins, p.dataDir, r.dataDir, leftOut); err != nil {
		return fail(err)
	}
	var lsn, label, spcmap string
	if err := conn.QueryRow(ctx, stop).Scan(&lsn, &label, &spcmap); err != nil {
		return fail(err)
	}
	if err := c.bins.writeOwned(filepath.Join(r.dataDir, "backup_label"), []byte(label)); err != nil {
		return fail(err)
	}
	if spcmap != "" {
		if err := c.bins.writeOwned(filepath.Join(r.dataDir, "tablespace_map"), []byte(spcmap)); err != nil {
			return fail(err)
		}
	}
	return nil
}

// Parts of a running server's data directory that a base backup leaves
// out, as pg_basebackup does: the contents of these directories,
var emptiedDirs = []string{"pg_dynshmem", "pg_notify", "pg_replslot", "pg_serial", "pg_snapshots", "pg_stat_tmp", "pg_subtrans"}

// these files at the top,
var leftOutFiles = []string{"postmaster.pid", "postmaster.opts", "backup_label", "tablespace_map",
	"postgresql.auto.conf.tmp", "current_logfiles.tmp"}

// and these anywhere, by the start of their names.
var leftOutPrefixes = []string{"pg_internal.init", "pgsql_tmp"}

// leftOut reports whether the path rel of a running server's data
// directory stays out of its copy. Of pg_wal only the directories are
// copied (archive_status and, from PostgreSQL 17, summaries), empty.
func leftOut(rel string, dir bool) bool {
	top, _, nested := strings.Cut(filepath.ToSlash(rel), "/")
	base := filepath.Base(rel)
	switch {
	case nested && top == "pg_wal":
		return !dir
	case nested && slices.Contains(emptiedDirs, top):
		return true
	case !nested && !dir && slices.Contains(leftOutFiles, rel):
		return true
	}
	for _, p := range leftOutPrefixes {
		if strings.HasPrefix(base, p) {
			return true
		}
	}
	return false
}

// recopy replaces the data directory of the stopped node n, which holds
// WAL the primary p never had, with a fresh copy of p's: what pg_rewind
// does, where the binaries lack it.
func (c *Cluster) recopy(ctx context.Context, n, p *Node) error {
	if err := os.RemoveAll(n.dataDir); err != nil {
		return n.errorf("removing the data directory to copy it again from %s: %w", p.name, err)
	}
	return c.clone(ctx, n, p)
}
