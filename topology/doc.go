// Package topology is the seam through which a Pool learns which servers
// exist. The connection string is one source of hosts; a cluster manager
// (Patroni's REST API, say) is another: it implements [Source] and reports
// each new [Topology] as a whole.
//
// A Topology names members by address and may claim a role and a zone for
// each. The Pool keeps the state of a member that stays, starts a new
// member as unknown (ranked by its claimed role until the server reports
// its own), and drains and closes the connections of a member that leaves.
// A claimed role is never the truth: a manager can keep claiming a leader
// whose server just died. It moves the questions forward, though: a member
// newly claimed as the primary is probed at once, and followed up while
// its promotion may still be under way.
//
// The package holds types only and imports no pgx package directly, nor
// failover: it sits below both failover and the sources (package patroni,
// say), which import it, so a source can live anywhere.
package topology
