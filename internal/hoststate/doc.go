// Package hoststate owns what a Pool knows of its hosts, and publishes the
// routing value its calls pick hosts from.
//
// Every observation of a host enters through [Owner.Observe]: a call's
// failure, a login or a connection that states the server's role, a
// refused dial, a probe's answer or silence, a replica's replay position
// seen on one of its connections, the primary's position asked after a
// write; only the primary's position that a pinned read asked for enters
// through [Owner.AnswerSample]. A new host set, from the connection
// string and a topology source, enters through [Owner.SetTable]. The owner
// folds the observation into the hosts' health ([hosthealth.Snapshot]) and
// the replicas' freshness ([replica.Book]), publishes one immutable
// [Routes] when anything a pick reads changed, and returns what changed:
// the observed host's status before and after, whether its server now
// stands in a role the Pool's target does not accept, each host's change
// and the end of a downtime (a time with no usable host for the target).
// The caller acts on that (logs, metrics, closing connections, telling the
// steerer and the topology source); no one else writes host state or
// publishes routes.
//
// # Order
//
// Each host has an epoch: how many failover events were recorded on it.
// Every observation of the host's health (a failure, a refusal, a login,
// a role seen on a pooled connection, a probe's answer or silence)
// carries the epoch in which it began ([Owner.Epoch]): the dial, the
// login, the acquire that sent the statement, the probe. When the host
// failed since, the observation is older news than that failure and is
// dropped: a server shutting down can answer a question it was asked
// before it began to, a login that began before a crash can complete
// after it, and calls that met the same crash each report it. The
// primary's WAL samples are kept only from an observation the Owner
// took. A replica's replay position is ordered otherwise: it never moves
// back on one server, so one seen on a connection is dropped only when
// that connection reached another server than the host's probe
// (Observation.Server).
//
// A local-first fallback host's win is no observation: the login of its
// connect is one, ordered as above, so a connect that began before the
// host failed does not win; and a win cannot undo a later failure, since
// the picker follows the steerer only to a host the Routes count usable.
//
// # What is not host state
//
// A pick and the checks at acquire read three more things, each kept
// elsewhere because it is no fact of a host's:
//   - the local-first steerer's choice (package patroni's Fallback): a
//     decision of the Pool's, taken from its own discovery rounds, which
//     the picker takes only while host state counts the host usable;
//   - when the Pool's last write completed (the call engine's lastWrite):
//     a fact of the Pool's own calls, which pins its Reader's reads;
//   - each host's pools' bookkeeping (package hostpool): connections
//     being opened or readied on a standby, the probe's statements a
//     connection holds, the server and login epoch of each connection.
//     They describe the Pool's connections, not the servers; what a
//     connection learns of its server (its role, its replay position) is
//     observed here.
//
// # Readers
//
// [Owner.Routes] is one atomic load; the value it returns is never
// modified. Each target's usable hosts are ranked when it is built, so
// reading the Routes neither locks nor allocates. A caller that finds no host it can use
// waits on the Moved channel of the Routes it looked at (or Changed, when
// it also reads the replicas' freshness): no change can slip between the
// look and the wait.
package hoststate
