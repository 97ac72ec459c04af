// Package kubernetes learns the servers of a PostgreSQL cluster that runs
// on Kubernetes from the objects its operator writes, and follows them
// with watches, so that a Pool goes where the operator sends it: to the
// pods it just created, to the replica it is promoting.
//
// It is a module of its own, so that importers of the core module pay
// nothing for it.
//
// # What it reads
//
// A [Source] implements topology.Source over the pods a label selector
// picks in one namespace. Each pod that is Ready, has an IP address and
// is not being deleted is a member, at its pod IP and the container port
// named "postgresql" or "postgres" (or the one SourceConfig.PortName
// names; 5432 when none is named). Its claimed role comes from the first
// role label it carries:
//
//	SourceConfig.RoleLabel                     the user's own, read first
//	cnpg.io/instanceRole=primary|replica       CloudNativePG
//	role=primary|replica                       older CloudNativePG (on pods labelled cnpg.io/cluster)
//	spilo-role=master|replica|standby_leader   Patroni on Kubernetes (Zalando's operator, Spilo)
//	postgres-operator.crunchydata.com/role=master|replica   Crunchy PGO
//
// Its zone comes from the label SourceConfig.ZoneLabel names,
// topology.kubernetes.io/zone by default. Kubernetes puts that label on
// nodes, not on pods: a pod has it only when the operator or an admission
// policy copies it there.
//
// With SourceConfig.Cluster set, the Source also watches that
// CloudNativePG Cluster (postgresql.cnpg.io/v1). CloudNativePG writes
// status.targetPrimary before it acts: when it names another pod than
// status.currentPrimary, a switchover or failover has begun. The Source
// then claims the target as the primary at once, as soon as it has an
// address, Ready or not, and leaves the current primary out, so the Pool
// probes the target and follows its promotion, and sends no new call to
// the server being let go. While targetPrimary
// is "pending" (a failover whose target is not chosen yet) it claims no
// primary. In steady state currentPrimary is the claimed primary. A
// claim is a hint: the Pool trusts what each server says of itself.
//
// # How it watches
//
// The Source lists the pods (and the Cluster), then watches each from the
// list's resourceVersion with bookmarks. A watch that ends or drops is
// resumed from the last resourceVersion seen, so no change is missed; a
// 410 Gone (the server no longer holds the changes since then) lists
// again. While the API server cannot be reached the last topology stays
// in force, and a list that leaves no pod to report is not reported:
// the Pool keeps its hosts and its calls go on. In steady state the
// Source holds one watch per collection open and sends nothing else.
//
// It does not implement topology.Refresher: the watch already delivers
// each change as it is written, and a Pool that asked for a fresh list on
// every failing host would send the API server a request per host failure
// per instance, which is what a watch is there to avoid.
//
// # A small client, not client-go
//
// The Source speaks to the API server with a small client of its own,
// over net/http and encoding/json, that decodes only the fields it reads.
// client-go would bring the API machinery, the generated types of every
// API group and their dependencies (several tens of modules, tens of MB
// of compiled code) into every service that wants its pods' addresses;
// a list, a watch and a kubeconfig take a few hundred lines. The cost is
// the authentication client-go's plugins provide: credentials come from a
// pod's service account (its token file read again before each request,
// so a rotated token is used) or from a kubeconfig's token, token file,
// client certificate or basic authentication; exec and auth-provider
// plugins are refused with an error naming the user entry.
//
// # Permissions
//
// The service account needs get, list and watch on pods in the namespace,
// and, with SourceConfig.Cluster, on clusters.postgresql.cnpg.io:
//
//	apiVersion: rbac.authorization.k8s.io/v1
//	kind: Role
//	metadata: {name: pgfailover, namespace: db}
//	rules:
//	- apiGroups: [""]
//	  resources: [pods]
//	  verbs: [get, list, watch]
//	- apiGroups: [postgresql.cnpg.io]
//	  resources: [clusters]
//	  verbs: [get, list, watch]
//
// # Connecting
//
// [ParseConfig] and [New] take a connection string with kubernetes_*
// keys (kubernetes_cluster=pg-main, say) and return a failover Config or
// Pool whose Topology is a Source; a Source built with [NewSource] goes
// into failover.Config.Topology by hand.
//
// Errors name the file, key or object at fault and never contain a
// token, a password or a private key.
package kubernetes
