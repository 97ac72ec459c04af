// Package replica decides where a read goes when it may be served by a
// streaming replica: which replicas are fresh enough, which of them is next
// in turn, and when a read must go to the primary instead.
//
// It holds no connections and does no I/O. The caller (the Pool's host
// state, internal/hoststate) feeds in what the probes and the Reader's
// reads learn: the primary's WAL position with the time it was read, and
// each replica's replay position.
// From these the package derives an upper bound on how stale each replica
// is:
//
//   - every probe of the primary records a Sample: its WAL position and the
//     time just before the position was asked for;
//   - a replica whose replay position has reached a sample taken at time t
//     holds every write acknowledged before t, so it is at most now − t
//     stale;
//   - the bound grows on its own as time passes, so a replica whose WAL
//     receiver stopped falls out of the gate even though nothing new is
//     learnt about it, while a replica of an idle primary stays fresh
//     because the primary's position does not move past it.
//
// A replica whose bound cannot be computed (never probed, probe failed,
// nothing replayed yet, no sample of the primary) is not eligible while a
// gate is set: unknown is never taken for zero.
//
// Read-your-writes uses the same samples. A read made soon after a write
// must see it: any replica that has replayed a position of the primary
// sampled after the write holds it. A Sampler keeps the primary's newest
// sample and says, for each such read, whether it serves or a new one
// must be asked for, with at most one request in flight, shared by every
// read that needs it; a sample of one primary never serves for another.
//
// While no primary is usable, no sample of it can be had. The Book then
// also gives an Outage: what each replica held when last looked at (a
// Report: how far it received and replayed WAL, and whether its WAL
// receiver was connected), from which Outage.Position derives the
// position a replica must have replayed to hold every write acknowledged
// before a given time: with synchronous replication, a standby flushed
// each such write before it was acknowledged; without, only once no
// replica can receive more, and then it holds what any promotion keeps.
//
// Every function takes the time from its caller, so tests run on a fake
// clock and never sleep.
package replica
