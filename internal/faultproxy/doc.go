// Package faultproxy is a TCP proxy for tests that puts network faults
// between a client and an upstream server: added latency, a blackhole, a
// reset of every connection, a cut of every connection, and answers held
// back. It can also move new connections to another upstream, or spread
// them over several.
//
// A [Proxy] listens on a local port and, for each connection it accepts,
// dials the upstream and copies bytes both ways. Its faults apply to the
// connections open when they are set and to those accepted later:
//
//   - [Proxy.SetLatency] delays every byte by the same duration in each
//     direction, so a round trip takes twice as long more. Bytes keep their
//     order and the delay does not add up: a chunk read while another waits
//     waits only its own delay.
//   - [Proxy.SetBlackhole] drops every byte both ways, as a host that stops
//     answering does: the proxy's kernel still acknowledges what the client
//     sends, new connections are accepted and hear nothing, and a
//     connection whose upstream closed stays open and silent on the
//     client's side until the blackhole ends, when it is closed. Bytes
//     dropped are lost; those read after the blackhole ends go through.
//   - [Proxy.Reset] closes every connection with a TCP RST each way at
//     once, discarding what was not delivered, as a middlebox or a peer's
//     kernel does.
//   - [Proxy.Cut] closes every connection as an orderly close would, each
//     way; new connections are accepted as before.
//   - [Proxy.Hold] keeps back what the upstream sends on the connections
//     open now, or on those the upstream knows by the given client ports,
//     their end included, until it is released: an answer, or the news of
//     a failure, that arrives late.
//
// [Proxy.SetUpstream] changes where new connections go, as a load
// balancer or a DNS name moved to another server does: those accepted
// after it dial the new upstream, or each the next of several in turn,
// while open connections stay with the upstream they dialed.
//
// [Proxy.Close] stops listening, closes every connection and returns once
// every goroutine of the proxy has ended.
//
// The package exists so that the module's fault-injection tests need no
// proxy from another module, whose requirements every importer of this
// module would find in its module graph.
package faultproxy
