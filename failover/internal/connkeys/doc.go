// Package connkeys reads package failover's own connection-string keys
// (target, zone, zones, failover_*, health_probe_*, name_recheck_interval,
// the Reader's, the patroni_*, query_wait_timeout and fallback_* keys,
// tcp_user_timeout, lazy_connect) into a plain [Settings].
//
// pgconn does not know these keys and files them under
// ConnConfig.RuntimeParams; failover.ParseConfig lets pgx parse the string,
// hands RuntimeParams to [Take], which removes every key of ours from it,
// and gives the result to [Read], which checks each value against its range
// over the defaults written here once. The one table of the keys, with
// their defaults and ranges, is failover.ParseConfig's doc comment.
//
// A value out of range is an [*Error]: the key, a message naming the value,
// and the cause. Messages are built so as not to hold a password, but a
// value may still hold one (a Patroni URL's userinfo, or a password typed
// into the wrong key): failover.ParseConfig scrubs every message before a
// caller sees it, so the package leaves that to its one caller.
//
// The package is pure: it reads no environment, no file and no clock.
// Where target_session_attrs came from is [connstr]'s to tell.
package connkeys
