// Package outcome decides what a failed statement means for its caller:
// whether it may run again on another host, whether its host is to be
// marked failed, and which typed error the caller gets. It is the one
// decision behind every path that sends SQL or connects: a Pool call, a
// statement inside a transaction, COMMIT, RunTx's reruns, the database/sql
// driver's statements and connects, a following pool's connects and the
// Listener's. [EndsConnect], its verdict on a connect with time left, is
// what a Pool's first connects and the probes' schedule read to tell a
// refusal no other host would mend.
//
// The decision is pure: [Describe] reads what an error says, the caller
// adds what it knows of its own progress (the phase, whether its context
// ended, its attempts and deadline), and [Decide] returns a [Decision].
// Applying it (marking the host, recording the event, backing off, wrapping
// the error) is the caller's, in one place after the decision.
package outcome
