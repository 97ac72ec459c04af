// Package follow builds package failover's following pools: genuine
// *pgxpool.Pool values (PgxPool's, and the Reader's PgxPool's) whose new
// connections go to the host the Pool's routes choose, and on to another
// when that one refuses before the session is ready.
//
// pgxpool offers no hook that retries a connect, so each connect is a
// chain of pgconn's own fallback attempts, one entry per host and TLS
// variant, round after round, of which the chain's DialFunc dials only
// the host its Walk chose (see connectChain). Every session's role is
// checked at login as a host pool's are (hostpool.Set.CheckRole), and a
// pool that connected to a host later found demoted is reset (Demoted).
//
// The choice of each host, the backoff and the budget are the caller's:
// a Walk, which package failover implements with the same call its
// statements use.
package follow
