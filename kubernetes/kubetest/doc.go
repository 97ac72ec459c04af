// Package kubetest lets a service test itself against PostgreSQL on
// Kubernetes the way it runs in production: a real kube-apiserver, a
// real PostgreSQL cluster whose servers are pods at addresses of their
// own, and the operator's moves (a switchover it announces, a failover, a
// pod rescheduled) one call each.
//
//	func TestOrdersOnKubernetes(t *testing.T) {
//		c := kubetest.Start(t, kubetest.PostgreSQL(failovertest.Replicas(2)))
//		dsn, err := c.ConnString("")
//		...
//		pool, err := kubernetes.New(ctx, dsn)
//		...
//		move, err := c.Switchover(ctx, nil) // as CloudNativePG does it
//		...
//	}
//
// # What runs
//
// [StartAPIServer] runs kube-apiserver with an etcd of its own, both
// child processes of the test on loopback ports, stopped when the test
// ends. It authenticates with static tokens: an administrator's, which
// the harness uses, and SourceUser's, which a kubeconfig from
// [APIServer.Kubeconfig] carries and which is granted only [SourceRole]
// in each namespace the harness creates, so a test proves that role is
// enough. No controller, scheduler or kubelet runs: pods are stored and
// never started, and the harness writes their status as the kubelet would.
// [APIServer.Stop] and [APIServer.Start] take the server away and bring
// it back on the same port, for drills of a Source whose API server is
// gone for a while; [APIServer.Requests] counts the requests it served,
// from its metrics; [APIServer.ServiceAccountDir] writes the files a
// pod's service account mount holds, for the in-cluster credentials.
//
// The kube-apiserver binary is built from source once per machine, with
// the go command (a few minutes), and cached in DefaultCacheDir; the
// command kubetest/cmd/kubefetch does that ahead of the tests. The
// environment variable PGFAILOVER_KUBE_APISERVER names another binary.
// etcd comes from the system (Debian's etcd-server package).
//
// [Start] runs a failovertest.Cluster and stores a pod for each node: a
// pod named <name>-N, ready at an address of its own on 127.0.47.0/24,
// port 5432, where the harness forwards connections to the node. Its
// labels are those of the operator the test picks (CloudNativePG,
// Spilo or Crunchy PGO); for CloudNativePG it also stores a Cluster
// (a minimal CustomResourceDefinition of postgresql.cnpg.io/v1 with the
// status subresource) whose status names the current and target primary.
//
// # The operator's moves
//
// [Cluster.Switchover], [Cluster.Failover], [Cluster.Rejoin] and
// [Cluster.Reschedule] write what the operator writes, in its order, and
// return a [Move] with the moments a test measures from: when the next
// primary was announced, when it became writable, when the labels were
// written.
//
// Servers run as the postgres system user and need the PostgreSQL server
// packages, as failovertest's do; the harness needs root for that, and
// loopback addresses beyond 127.0.0.1, which Linux gives.
package kubetest
