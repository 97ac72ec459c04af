// Package connstr scans a libpq connection string, in either form
// (keyword/value or postgres:// URL), for what pgconn's parse result
// cannot tell.
//
// Everything failover.ParseConfig can take from pgconn's parse result, it
// takes from there: hosts, ports and TLS variants (ConnConfig and its
// Fallbacks), the values of the failover package's keys (pgconn files
// unknown keys under RuntimeParams, from the string and from a service file
// alike), the connect_timeout value and the effective password. The scanner
// exists for four things that result cannot tell:
//
//  1. target_session_attrs: its value and where it came from (the string,
//     a service file, or PGTARGETSESSIONATTRS). pgconn keeps neither; it
//     turns the value into a ValidateConnect func, and refuses the
//     spellings it does not know (replica, prefer-replica), so the value
//     must be known before pgconn sees the string
//     ([Result.TargetSessionAttrs]).
//  2. Whether connect_timeout was set at all. ConnConfig.ConnectTimeout is
//     0 both when nothing sets it and for connect_timeout=0 (no limit);
//     only a value of 0 needs the scan, a non-zero one answers by itself
//     ([Result.ConnectTimeoutSet]).
//  3. The secrets to scrub from error messages, as written: the URL
//     userinfo password raw and percent-decoded, and every password= and
//     sslpassword= value. They are needed when pgx rejects the string, so
//     that there is no parse result at all; pgconn keeps no sslpassword
//     ([Result.Secrets]).
//  4. The byte offsets of the target_session_attrs pairs, so that the
//     string handed to pgx is the caller's, byte for byte, without them
//     (plus target_session_attrs=any when a service file or the
//     environment would otherwise give pgconn a target of its own)
//     ([Result.WithoutTargetSessionAttrs]).
//
// It also tells whether the string names a host at all
// ([Result.NamesHost]), which pgconn's result hides by filling in its
// default host.
//
// The scanner follows pgconn's grammar for both forms closely enough to
// find where each key/value pair sits; when it cannot make sense of a
// string, pgconn cannot either, and pgconn's error is reported. The fuzz
// test holds it to both claims.
//
// The package reads the environment variables libpq and pgconn read, and
// a service file when the string or PGSERVICE names a service; it reads
// nothing else and holds no state between calls.
package connstr
