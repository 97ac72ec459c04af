package connstr

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgservicefile"
	"github.com/jackc/pgx/v5/pgconn"
)

// EnvTargetSessionAttrs is the environment variable that gives libpq and
// pgconn a default target_session_attrs.
const EnvTargetSessionAttrs = "PGTARGETSESSIONATTRS"

// Other environment variables that libpq and pgconn read; the scanner looks
// at them only to tell what pgconn will do.
const (
	envConnectTimeout = "PGCONNECT_TIMEOUT"
	envService        = "PGSERVICE"
	envServiceFile    = "PGSERVICEFILE"
)

// keyTargetSessionAttrs is libpq's key. pgconn parses it itself, so it
// never shows up in RuntimeParams.
const keyTargetSessionAttrs = "target_session_attrs"

// pair is one key/value pair of a connection string.
type pair struct {
	key, value string
	start, end int // byte offsets of the whole pair in the string
}

// Result is what [Scan] found in one connection string.
type Result struct {
	s          string // the string as given
	isURL      bool
	pairs      []pair // keyword/value pairs, or the URL's query parameters
	queryStart int    // URL only: offset just after '?', or -1 when there is no query
	userinfoPW string // URL only: the password in the userinfo, as written
	urlHost    bool   // URL only: the URL names at least one host
}

// Scan finds the key/value pairs of a connection string. On error it still
// returns what it found before the error, for [Result.Secrets]; the error
// means pgconn refuses the string too.
func Scan(s string) (Result, error) {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		res, err := scanURL(s)
		res.s = s
		return res, err
	}
	pairs, err := scanKeywordValue(s)
	return Result{s: s, pairs: pairs, queryStart: -1}, err
}

// get returns the value of the last pair named key, as pgconn keeps the
// last of repeated keys.
func (r Result) get(key string) (string, bool) {
	for i := len(r.pairs) - 1; i >= 0; i-- {
		if r.pairs[i].key == key {
			return r.pairs[i].value, true
		}
	}
	return "", false
}

// NamesHost reports whether the string (or its service file section svc,
// or PGHOST) names a host, rather than leaving pgconn to pick its default.
func (r Result) NamesHost(svc map[string]string) bool {
	return r.urlHost || r.has("host") || r.has("hostaddr") || svc["host"] != "" || svc["hostaddr"] != "" ||
		os.Getenv("PGHOST") != "" || os.Getenv("PGHOSTADDR") != ""
}

func (r Result) has(key string) bool {
	_, ok := r.get(key)
	return ok
}

// Secrets lists the password-like values found by the scan, as written and
// as decoded. A scan that failed still lists those found before the error.
func (r Result) Secrets() []string {
	var out []string
	if r.userinfoPW != "" {
		out = append(out, r.userinfoPW)
		if d, err := uriDecode(r.userinfoPW); err == nil && d != r.userinfoPW {
			out = append(out, d)
		}
	}
	for _, p := range r.pairs {
		if p.key == "password" || p.key == "sslpassword" {
			out = append(out, p.value)
		}
	}
	return out
}

// ServiceSettings returns the service file section that pgconn would read,
// or nil when there is none. pgconn takes the service name from the string
// or PGSERVICE and the file from the string, PGSERVICEFILE or
// ~/.pg_service.conf. A file that cannot be read counts as none here; pgx
// reports it.
func (r Result) ServiceSettings() map[string]string {
	name, ok := r.get("service")
	if !ok {
		name = os.Getenv(envService)
	}
	if name == "" {
		return nil
	}
	path, ok := r.get("servicefile")
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

// ConnectTimeoutSet reports whether pgconn found connect_timeout in the
// string, the service file section svc or PGCONNECT_TIMEOUT. cc is pgconn's
// parse result: a non-zero ConnectTimeout was set by one of them, and only a
// zero one needs a look at where it could have come from.
func (r Result) ConnectTimeoutSet(cc *pgconn.Config, svc map[string]string) bool {
	if cc.ConnectTimeout != 0 || r.has("connect_timeout") || os.Getenv(envConnectTimeout) != "" {
		return true
	}
	_, ok := svc["connect_timeout"]
	return ok
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
func scanURL(s string) (Result, error) {
	res := Result{isURL: true, queryStart: -1}
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

// WithoutTargetSessionAttrs returns the scanned string without its
// target_session_attrs pairs. With neutral set it also adds
// target_session_attrs=any, which outranks a service file and
// PGTARGETSESSIONATTRS inside pgconn, so pgconn neither rejects a spelling
// it does not know nor installs a check of its own. Everything else is left
// byte for byte as written.
func (r Result) WithoutTargetSessionAttrs(neutral bool) string {
	s := r.s
	if !r.has(keyTargetSessionAttrs) && !neutral {
		return s
	}
	const neutralPair = keyTargetSessionAttrs + "=any"
	if !r.isURL {
		var b strings.Builder
		if neutral {
			// At the front: appended after a value that ends in a backslash
			// it would be swallowed by that value.
			b.WriteString(neutralPair + " ")
		}
		last := 0
		for _, p := range r.pairs {
			if p.key == keyTargetSessionAttrs {
				b.WriteString(s[last:p.start])
				last = p.end
			}
		}
		b.WriteString(s[last:])
		return b.String()
	}

	if r.queryStart < 0 {
		return s + "?" + neutralPair
	}
	var kept []string
	if neutral {
		kept = append(kept, neutralPair)
	}
	for _, p := range r.pairs {
		if p.key != keyTargetSessionAttrs {
			kept = append(kept, s[p.start:p.end])
		}
	}
	return s[:r.queryStart] + strings.Join(kept, "&")
}

// TargetSessionAttrs is the effective target_session_attrs and where it
// came from.
type TargetSessionAttrs struct {
	Value       string
	Set         bool // given in the connection string or a service file
	FromService bool // a service file has the key (whether or not it won)
	FromEnv     bool // PGTARGETSESSIONATTRS is set (whether or not it won)
	EnvOnly     bool // the value is the environment variable's
}

// TargetSessionAttrs works out target_session_attrs the way pgconn does:
// the connection string first, then the service file section svc, then the
// environment.
func (r Result) TargetSessionAttrs(svc map[string]string) TargetSessionAttrs {
	var t TargetSessionAttrs
	svcValue, svcHas := svc[keyTargetSessionAttrs]
	envValue := os.Getenv(EnvTargetSessionAttrs)
	t.FromService = svcHas
	t.FromEnv = envValue != ""
	switch {
	case r.has(keyTargetSessionAttrs):
		t.Value, _ = r.get(keyTargetSessionAttrs)
		t.Set = true
	case svcHas:
		t.Value, t.Set = svcValue, true
	case t.FromEnv:
		t.Value, t.EnvOnly = envValue, true
	}
	return t
}
