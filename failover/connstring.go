package failover

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgservicefile"
	"github.com/jackc/pgx/v5/pgconn"
)

// Environment variables that libpq and pgconn read; ParseConfig looks at
// them only to tell what pgconn will do.
const (
	envTargetSessionAttrs = "PGTARGETSESSIONATTRS"
	envConnectTimeout     = "PGCONNECT_TIMEOUT"
	envService            = "PGSERVICE"
	envServiceFile        = "PGSERVICEFILE"
)

// The connection-string scanner.
//
// Everything ParseConfig can take from pgconn's parse result, it takes from
// there: hosts, ports and TLS variants (ConnConfig and its Fallbacks), the
// values of this package's keys (pgconn files unknown keys under
// RuntimeParams, from the string and from a service file alike), the
// connect_timeout value and the effective password. The scanner exists for
// four things that result cannot tell:
//
//  1. target_session_attrs: its value and where it came from (the string,
//     a service file, or PGTARGETSESSIONATTRS). pgconn keeps neither; it
//     turns the value into a ValidateConnect func, and refuses the
//     spellings it does not know (replica, prefer-replica), so the value
//     must be known before pgconn sees the string.
//  2. Whether connect_timeout was set at all. ConnConfig.ConnectTimeout is
//     0 both when nothing sets it and for connect_timeout=0 (no limit);
//     only a value of 0 needs the scan, a non-zero one answers by itself.
//  3. The secrets to scrub from error messages, as written: the URL
//     userinfo password raw and percent-decoded, and every password= and
//     sslpassword= value. They are needed when pgx rejects the string, so
//     that there is no parse result at all; pgconn keeps no sslpassword.
//  4. The byte offsets of the target_session_attrs pairs, so that the
//     string handed to pgx is the caller's, byte for byte, without them
//     (plus target_session_attrs=any when a service file or the
//     environment would otherwise give pgconn a target of its own).
//
// The scanner follows pgconn's grammar for both forms closely enough to
// find where each key/value pair sits; when it cannot make sense of a
// string, pgconn cannot either, and pgconn's error is reported. The fuzz
// test holds it to both claims.

// pair is one key/value pair of a connection string.
type pair struct {
	key, value string
	start, end int // byte offsets of the whole pair in the string
}

// scanResult is what scanConnString found.
type scanResult struct {
	isURL      bool
	pairs      []pair // keyword/value pairs, or the URL's query parameters
	queryStart int    // URL only: offset just after '?', or -1 when there is no query
	userinfoPW string // URL only: the password in the userinfo, as written
	urlHost    bool   // URL only: the URL names at least one host
}

// get returns the value of the last pair named key, as pgconn keeps the
// last of repeated keys.
func (s scanResult) get(key string) (string, bool) {
	for i := len(s.pairs) - 1; i >= 0; i-- {
		if s.pairs[i].key == key {
			return s.pairs[i].value, true
		}
	}
	return "", false
}

// namesHost reports whether the string (or its service file entry, or
// PGHOST) names a host, rather than leaving pgconn to pick its default.
func (s scanResult) namesHost(svc map[string]string) bool {
	return s.urlHost || s.has("host") || s.has("hostaddr") || svc["host"] != "" || svc["hostaddr"] != "" ||
		os.Getenv("PGHOST") != "" || os.Getenv("PGHOSTADDR") != ""
}

func (s scanResult) has(key string) bool {
	_, ok := s.get(key)
	return ok
}

// secrets lists the password-like values found by the scan, as written and
// as decoded.
func (s scanResult) secrets() []string {
	var out []string
	if s.userinfoPW != "" {
		out = append(out, s.userinfoPW)
		if d, err := uriDecode(s.userinfoPW); err == nil && d != s.userinfoPW {
			out = append(out, d)
		}
	}
	for _, p := range s.pairs {
		if p.key == "password" || p.key == "sslpassword" {
			out = append(out, p.value)
		}
	}
	return out
}

// serviceSettings returns the service file section that pgconn would read,
// or nil when there is none. pgconn takes the service name from the string
// or PGSERVICE and the file from the string, PGSERVICEFILE or
// ~/.pg_service.conf. A file that cannot be read counts as none here; pgx
// reports it.
func (s scanResult) serviceSettings() map[string]string {
	name, ok := s.get("service")
	if !ok {
		name = os.Getenv(envService)
	}
	if name == "" {
		return nil
	}
	path, ok := s.get("servicefile")
	if !ok {
		path = os.Getenv(envServiceFile)
	}
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil
		}
		path = filepath.Join(home, ".pg_service.conf")
	}
	sf, err := pgservicefile.ReadServicefile(path)
	if err != nil {
		return nil
	}
	svc, err := sf.GetService(name)
	if err != nil {
		return nil
	}
	return svc.Settings
}

// connectTimeoutSet reports whether pgconn found connect_timeout in the
// string, the service file section svc or PGCONNECT_TIMEOUT. cc is pgconn's
// parse result: a non-zero ConnectTimeout was set by one of them, and only a
// zero one needs a look at where it could have come from.
func (s scanResult) connectTimeoutSet(cc *pgconn.Config, svc map[string]string) bool {
	if cc.ConnectTimeout != 0 || s.has("connect_timeout") || os.Getenv(envConnectTimeout) != "" {
		return true
	}
	_, ok := svc["connect_timeout"]
	return ok
}

// scanConnString finds the key/value pairs of a connection string. On error
// it still returns what it found before the error, for the secrets list.
func scanConnString(s string) (scanResult, error) {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		return scanURL(s)
	}
	pairs, err := scanKeywordValue(s)
	return scanResult{pairs: pairs, queryStart: -1}, err
}

var (
	errScanSyntax = errors.New("malformed connection string")
	errScanNUL    = errors.New("connection string contains a NUL byte")
)

// kvSpace is the whitespace of the keyword/value form.
const kvSpace = " \t\n\r\v\f"

func isKVSpace(b byte) bool { return strings.IndexByte(kvSpace, b) >= 0 }

func skipKVSpace(s string, i int) int {
	for i < len(s) && isKVSpace(s[i]) {
		i++
	}
	return i
}

// scanKeywordValue reads "key = value" pairs with libpq's rules: a value
// is either a run of non-space bytes or a single-quoted string, and a
// backslash makes the byte after it literal in both. As in libpq, a value
// starts at the first non-space byte after '=', so in "a= b=c" the value of
// a is "b=c".
func scanKeywordValue(s string) ([]pair, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, errScanNUL
	}
	var pairs []pair
	i := skipKVSpace(s, 0)
	for i < len(s) {
		start := i
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			return pairs, errScanSyntax
		}
		eq += i
		key := strings.TrimRight(s[i:eq], kvSpace)
		if key == "" || strings.ContainsAny(key, kvSpace) {
			return pairs, errScanSyntax
		}
		j := skipKVSpace(s, eq+1)
		var value string
		var end int
		switch {
		case j == len(s):
			end = j
		case s[j] != '\'':
			k := j
			for k < len(s) && !isKVSpace(s[k]) {
				if s[k] == '\\' {
					k++
					if k == len(s) {
						break
					}
				}
				k++
			}
			value, end = unescapeKV(s[j:k]), k
		default:
			k := j + 1
			for k < len(s) && s[k] != '\'' {
				if s[k] == '\\' {
					k++
				}
				k++
			}
			if k >= len(s) {
				return pairs, errScanSyntax
			}
			value, end = unescapeKV(s[j+1:k]), k+1
		}
		pairs = append(pairs, pair{key: canonicalKey(key), value: value, start: start, end: end})
		i = skipKVSpace(s, end)
	}
	return pairs, nil
}

// unescapeKV drops each backslash and keeps the byte after it.
func unescapeKV(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			if i == len(s) {
				break
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// canonicalKey applies pgconn's one key alias.
func canonicalKey(k string) string {
	if k == "dbname" {
		return "database"
	}
	return k
}

// scanURL finds the query parameters of a postgres:// URL. It walks the
// URL as pgconn does (libpq's grammar, which allows host lists and is not
// what net/url accepts): an optional userinfo ending at an '@' met before
// any '/', then host[:port] items separated by commas, with IPv6 addresses
// in brackets, then an optional /dbname, then an optional ?query.
func scanURL(s string) (scanResult, error) {
	res := scanResult{isURL: true, queryStart: -1}
	if strings.IndexByte(s, 0) >= 0 {
		return res, errScanNUL
	}
	i := strings.Index(s, "://") + len("://")

	if at := strings.IndexAny(s[i:], "@/"); at >= 0 && s[i+at] == '@' {
		if _, pw, ok := strings.Cut(s[i:i+at], ":"); ok {
			res.userinfoPW = pw
		}
		i += at + 1
	}

	hostStart := i
	for {
		if i < len(s) && s[i] == '[' {
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return res, errScanSyntax
			}
			i += end + 1
		}
		for i < len(s) && s[i] != '/' && s[i] != '?' && s[i] != ',' {
			i++
		}
		if i < len(s) && s[i] == ',' {
			i++
			continue
		}
		break
	}
	res.urlHost = i > hostStart
	if i < len(s) && s[i] == '/' {
		q := strings.IndexByte(s[i:], '?')
		if q < 0 {
			return res, nil
		}
		i += q
	}
	if i >= len(s) {
		return res, nil
	}
	// s[i] == '?'
	i++
	res.queryStart = i
	for i < len(s) {
		end := strings.IndexByte(s[i:], '&')
		if end < 0 {
			end = len(s)
		} else {
			end += i
		}
		rawKey, rawValue, ok := strings.Cut(s[i:end], "=")
		if !ok || strings.Contains(rawValue, "=") {
			return res, errScanSyntax
		}
		key, err := uriDecode(rawKey)
		if err != nil {
			return res, errScanSyntax
		}
		value, err := uriDecode(rawValue)
		if err != nil {
			return res, errScanSyntax
		}
		res.pairs = append(res.pairs, pair{key: canonicalKey(key), value: value, start: i, end: end})
		i = end + 1
	}
	return res, nil
}

// uriDecode decodes a URL component as libpq does: %XX escapes (not %00),
// spaces allowed only at either end and dropped there, and '+' left alone.
func uriDecode(s string) (string, error) {
	s = strings.Trim(s, " ")
	if strings.IndexByte(s, ' ') >= 0 {
		return "", errScanSyntax
	}
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errScanSyntax
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 || hi<<4|lo == 0 {
			return "", errScanSyntax
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// rewriteConnString returns s without its target_session_attrs pairs. With
// neutral set it also adds target_session_attrs=any, which outranks a
// service file and PGTARGETSESSIONATTRS inside pgconn, so pgconn neither
// rejects a spelling it does not know nor installs a check of its own.
// Everything else is left byte for byte as written.
func rewriteConnString(s string, scan scanResult, neutral bool) string {
	if !scan.has(keyTargetSessionAttrs) && !neutral {
		return s
	}
	const neutralPair = keyTargetSessionAttrs + "=any"
	if !scan.isURL {
		var b strings.Builder
		if neutral {
			// At the front: appended after a value that ends in a backslash
			// it would be swallowed by that value.
			b.WriteString(neutralPair + " ")
		}
		last := 0
		for _, p := range scan.pairs {
			if p.key == keyTargetSessionAttrs {
				b.WriteString(s[last:p.start])
				last = p.end
			}
		}
		b.WriteString(s[last:])
		return b.String()
	}

	if scan.queryStart < 0 {
		return s + "?" + neutralPair
	}
	var kept []string
	if neutral {
		kept = append(kept, neutralPair)
	}
	for _, p := range scan.pairs {
		if p.key != keyTargetSessionAttrs {
			kept = append(kept, s[p.start:p.end])
		}
	}
	return s[:scan.queryStart] + strings.Join(kept, "&")
}

// targetSessionAttrs is the effective target_session_attrs and where it
// came from.
type targetSessionAttrs struct {
	value       string
	set         bool // given in the connection string or a service file
	fromService bool // a service file has the key (whether or not it won)
	fromEnv     bool // PGTARGETSESSIONATTRS is set (whether or not it won)
	envOnly     bool // the value is the environment variable's
}

// findTargetSessionAttrs works out target_session_attrs the way pgconn does:
// the connection string first, then the service file section svc, then the
// environment.
func (s scanResult) findTargetSessionAttrs(svc map[string]string) targetSessionAttrs {
	var t targetSessionAttrs
	svcValue, svcHas := svc[keyTargetSessionAttrs]
	envValue := os.Getenv(envTargetSessionAttrs)
	t.fromService = svcHas
	t.fromEnv = envValue != ""
	switch {
	case s.has(keyTargetSessionAttrs):
		t.value, _ = s.get(keyTargetSessionAttrs)
		t.set = true
	case svcHas:
		t.value, t.set = svcValue, true
	case t.fromEnv:
		t.value, t.envOnly = envValue, true
	}
	return t
}
