// Package failovertest lets a service test its own code against real
// PostgreSQL failovers in go test, as net/http/httptest lets it test
// against a real HTTP server.
//
// Start runs a throwaway cluster for one test: a primary and streaming
// replicas on loopback, each a child process of the test, stopped and
// removed when the test ends. Its ConnString goes to failover.New as is.
// Faults are one call each, and a Ledger records what each of the
// application's writes returned and then checks the table:
//
//	func TestPlaceOrder(t *testing.T) {
//		cluster := failovertest.Start(t, failovertest.Replicas(2), failovertest.SyncReplication())
//		pool, err := failover.New(ctx, cluster.ConnString(""))
//		...
//		var ledger failovertest.Ledger[string]
//		go func() { // the load: the service's own code
//			for i := 0; ; i++ {
//				key := fmt.Sprint("order-", i)
//				ledger.Record(key, svc.PlaceOrder(ctx, key))
//			}
//		}()
//		newPrimary, err := cluster.Failover(ctx, 500*time.Millisecond)
//		...
//		tally, err := ledger.Check(ctx, newPrimary, "orders", "key")
//		if err != nil {
//			t.Fatal(err) // names each key lost, applied twice, or failed yet present
//		}
//	}
//
// # Faults
//
//   - Cluster.Failover crashes the primary (immediate shutdown) and, after
//     a gap the test chooses, promotes the standby that received the most
//     WAL; the other standbys follow it. A promotion 100 ms after the crash
//     and one 10 s after it are different failovers.
//   - Cluster.CrashPrimary and Cluster.Promote do the two halves apart.
//   - Cluster.Switchover hands the primary role over cleanly and brings the
//     old primary back as a standby; Cluster.Rejoin does the latter for a
//     crashed one.
//   - Node.Crash, Node.Restart: one server down, or restarted in place.
//     Node.Stop shuts one down cleanly and Node.Start brings it back, with
//     the test's own steps between.
//   - Node.Freeze and Node.Thaw: every process of a server stopped with
//     SIGSTOP, as a machine that hangs: nothing answers, nothing is closed.
//   - Node.PauseReplay and Node.ResumeReplay: a standby that lags on
//     demand.
//   - With the Proxies option, a TCP proxy stands in front of each server
//     and the application connects through it: Node.SetBlackhole cuts the
//     network to a server that runs on, Node.SetLatency slows it down,
//     Node.ResetConnections resets every connection to it.
//   - Cluster.Endpoint puts one address in front of a node, as a writer
//     endpoint, a Kubernetes Service or HAProxy does (or in front of
//     several, taken in turn, as a reader endpoint): Endpoint.MoveTo sends
//     new connections elsewhere while open ones stay on their server, and
//     Endpoint.Cut closes the open ones. Cluster.PrimaryEndpoint and
//     Cluster.ReplicaEndpoint follow the primary, or the replicas, by
//     themselves, a lag the test chooses after each drill that changes
//     them, as a DNS TTL or a health check's interval does.
//
// # Servers
//
// The PostgreSQL server programs are taken from the directory that
// $PGTEST_BINDIR names (BinDirEnv), else from the newest
// /usr/lib/postgresql/<major>/bin, `pg_config --bindir` and PATH. When they
// are missing and nothing points elsewhere, the first Start installs them
// if it can: as root on Debian or Ubuntu, with apt-get (about 30 s, with a
// line on stderr saying so), unless $PGTEST_INSTALL is 0 (InstallEnv).
// Otherwise Start fails the test, and New returns an error wrapping
// ErrNoBinaries; its text ends with the command that installs them here
// (apt-get, dnf or brew). With the SkipUnavailable option, or
// $PGTEST_SKIP_UNAVAILABLE=1 (SkipUnavailableEnv), Start skips the test
// instead, with that reason; a CI job that must run the tests sets
// neither. initdb runs once per test process, into a template held in
// memory; every cluster copies it, and replicas are copies of the
// primary's data directory, so a primary with one replica is ready within
// a few seconds.
//
// Servers listen on 127.0.0.1 only, each on a port of its own, with
// settings tuned for speed (fsync off) that lose nothing a test needs. The
// superuser "postgres" connects over TCP with a password (Password,
// DefaultPassword), as an application does. When the test process runs as
// root, the servers run as the "postgres" system user, which PostgreSQL
// requires; as any other user they run as that user. Each server's
// cluster_name is its node's name, so `SHOW cluster_name` tells which node
// a connection reached. Clusters of one test binary, and of several, run
// side by side. When a test ends, its cluster's servers are stopped and
// their directories, logs and sockets removed: a test binary that exits
// leaves nothing in the temporary directory. A cluster left behind by a
// killed test binary is removed by the next one that starts a cluster.
//
// Errors from the servers' side begin with "pgtest:", the harness this
// package is built on, and carry the end of the server's log; Node.LogTail
// and Member.LogTail read it at any time, and when a test fails the end of
// every server's log is written to the test log.
//
// # Roles
//
// In a Cluster the harness decides who is primary, not a failover
// manager: node 0 first, then whoever a fault promoted. Cluster.Primary
// reports it, even while it is down after CrashPrimary. The test chooses
// when a promotion happens and which standby it promotes, so a failure is
// reproducible. With SyncReplication it also keeps each new primary's
// synchronous standbys as a failover manager does: the standbys that follow
// it, or none, so that a primary left alone keeps taking commits.
//
// # Patroni
//
// StartPatroni runs a real Patroni cluster instead (one etcd, a Patroni
// per server), where Patroni decides who leads, when and how the old
// leader comes back, with its own timing: PatroniCluster.Switchover asks
// for a planned switchover, CrashLeader kills the leader's server and
// LoseLeader its whole machine, and each returns once the new leader
// accepts writes; WaitHealthy waits until every member streams again. Its
// APIURLs serve the Pool's patroni_api_urls. It needs the patroni,
// patronictl and etcd programs, installed like PostgreSQL's when missing,
// and takes some seconds to start.
package failovertest
