// Package pgtest runs real PostgreSQL servers for integration tests: a
// primary and any number of streaming replicas on loopback ports, plus the
// drills a failover library must survive (failover, switchover, crash,
// rejoin, replay lag on demand). It is the engine of the public harness,
// failover/failovertest, which the project's own tests use where it
// serves; they come here for what only the project needs (CPU accounting,
// server logs, Patroni members one by one), and from package failover's
// internal tests, which cannot import the harness.
//
//	func TestSomething(t *testing.T) {
//		c := pgtest.Start(t, pgtest.Options{Replicas: 2})
//		pool, err := failover.New(ctx, c.ConnString("target_session_attrs=read-write"))
//		...
//		if err := c.Failover(ctx, c.Nodes()[1]); err != nil {
//			t.Fatal(err)
//		}
//	}
//
// Start fails the test (it never skips) when the servers cannot run.
// Programs use New and Close.
//
// # Servers
//
// The PostgreSQL programs are taken from Options.BinDir, else the directory
// in $PGTEST_BINDIR, else the newest /usr/lib/postgresql/<major>/bin, else
// `pg_config --bindir`, else PATH. When they are missing from the usual
// places (neither BinDir nor $PGTEST_BINDIR set), New installs them if it
// can and $PGTEST_INSTALL (InstallEnv) is not 0: as root on Debian or
// Ubuntu, with apt-get (printing "pgtest: installing postgresql-15 (about
// 30 s)…" on stderr, one process at a time, the packages' services kept
// from starting). Elsewhere, and when
// BinDir or $PGTEST_BINDIR names a directory without them, New fails with
// an error wrapping ErrNoBinaries that ends with the command installing
// them on this system (apt-get, dnf or brew). EnsureServer and
// EnsurePatroni do the same ahead of time; cmd/pginstall runs them.
// cmd/pgfetch puts a build of another PostgreSQL major in a cache and
// prints its directory, for $PGTEST_BINDIR.
//
// The harness needs postgres and initdb; pg_basebackup and pg_rewind are
// used when they are in the same directory. initdb runs once per test
// process into a template, held in memory (so that none is left on disk
// however the process ends), that every cluster copies. Replicas are made
// with pg_basebackup, or without it by copying the primary's data
// directory between pg_backup_start and pg_backup_stop (pg_start_backup and
// pg_stop_backup before PostgreSQL 15) the way pg_basebackup does: without
// WAL, postmaster.pid and the like; the replica streams the WAL it needs
// from the primary. Each server is started as
// `postgres -D <dir> -c port=<port>`, directly as a child of the test
// process, in its own process group. When the test process runs as root,
// the servers run as the "postgres" system user (PostgreSQL refuses root).
//
// Every cluster has its own directory under os.TempDir(), removed by Close,
// so clusters of one process, and of several test binaries, run side by
// side. A directory left by a process that died without Close (a test
// binary killed by -timeout) is removed, and its servers killed, by the next
// process that starts a cluster.
//
// Servers listen on 127.0.0.1 only. Superuser "postgres" connects over TCP
// with scram-sha-256 and Options.Password, so connection strings carry the
// password and a wrong one really fails; replication connections from
// 127.0.0.1 and everything on the Unix socket are trusted. The harness uses
// the socket for its own work. Settings are tuned for speed (fsync=off and
// small buffers) and for failover drills (wal_log_hints=on and
// full_page_writes=on so pg_rewind works, wal_keep_size=64MB instead of
// replication slots). Each server logs to postgres.log in its node
// directory; errors carry the tail of that log, and Start writes every log
// tail to the test output when the test failed.
//
// # Topology
//
// Node 0 starts as primary. Cluster.Primary is who the harness last made
// primary; it is not re-discovered, so topology changes made behind the
// harness's back (pg_promote called by a test, say) are not seen. Standbys
// stream from the primary directly (no cascading) and identify themselves
// with application_name set to the node name, as seen in
// pg_stat_replication. With SyncReplication, the primary's
// synchronous_standby_names lists the standbys that follow it, and the
// drills keep it so (see Options.SyncReplication).
//
// Failover stops the primary immediately and promotes a standby; Switchover
// stops it cleanly first and then brings it back as a standby. A node that
// holds WAL the new primary never had (the old primary after Failover, or a
// standby that had received more than the promoted one) cannot simply
// follow; Rejoin and the followers step of Failover/Switchover detect this
// and rewind it with pg_rewind, or without pg_rewind by replacing its data
// directory with a fresh copy of the new primary's (Node.Rewinds counts
// how often).
//
// Node.Start restarts a node in whatever role its data directory holds: a
// former primary stopped by Failover comes back as a second primary. Use
// Rejoin to bring it back as a standby.
//
// A standby with replay paused (Node.PauseReplay) keeps receiving WAL but
// cannot switch to a new primary until replay resumes; Repoint (and so
// Failover and Switchover) then returns without waiting for it, and
// WaitReplicated waits until it has been resumed and caught up.
//
// Node.Freeze stops every process of a server with SIGSTOP (a machine that
// hangs: nothing answers, nothing is closed) and Node.Thaw resumes it; Stop
// and Close thaw a frozen server first. It needs /proc (Linux).
//
// Options.Settings may not set port, listen_addresses or
// unix_socket_directories: the harness manages them.
//
// # Patroni
//
// StartPatroni (NewPatroni for programs) runs a real Patroni cluster:
// PatroniOptions.Members (3) Patroni processes on one etcd, all on
// loopback, with synchronous_mode on (unless Async), ttl 10 s, loop_wait
// 1 s, retry_timeout 3 s and primary_start_timeout 0. It needs the
// programs patroni, patronictl and etcd in PATH (Debian bookworm: apt-get
// install patroni etcd-server, giving Patroni 3.0.2 and etcd 3.4); they are
// installed like the PostgreSQL programs, and where that cannot be done
// StartPatroni fails the test with the command that installs them.
//
//	pc := pgtest.StartPatroni(t, pgtest.PatroniOptions{})
//	pool, err := failover.New(ctx, pc.ConnString("target_session_attrs=read-write"))
//	...
//	old, err := pc.KillLeaderPostmaster(ctx)
//	leader, err := pc.WaitNewLeader(ctx, old)
//	err = pc.WaitHealthy(ctx)
//
// Patroni decides who leads: Leader and SyncStandby read GET /cluster,
// WaitNewLeader waits until another member answers /primary with 200 and
// its server is out of recovery, WaitHealthy until every member streams
// from one leader. The drills (Switchover, KillLeaderPostmaster,
// KillLeaderNode, KillMember) return once the fault is injected; the Wait
// methods wait for the recovery, and RestartMember brings back a killed
// member. ConnString, APIURLs and Members give what a client needs.
//
// The first leader copies the initdb template; the others are base backups
// made by Patroni, which needs pg_basebackup and pg_rewind beside the
// server programs. PostgreSQL settings match Cluster's (fsync off,
// wal_log_hints and full_page_writes on for pg_rewind, which Patroni runs
// with a rewind user of its own; the same pg_hba rules and password).
// Patroni runs as the postgres user when the test process is root, with
// its PostgreSQL in a session of its own; etcd runs as the test process's
// user, with its data on /dev/shm where there is one. Every Patroni start
// waits until etcd grants a lease promptly: Patroni 3.0.2 exits at start
// when etcd is slow to grant its own. The kernel kills Patroni and etcd if
// the test process dies, and the next process's sweep kills any
// PostgreSQL they left and removes etcd's data. Each member writes
// Patroni's and PostgreSQL's output to patroni.log in its directory.
package pgtest
