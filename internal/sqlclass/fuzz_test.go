package sqlclass

import (
	"strings"
	"testing"
)

// FuzzReplaySafe checks properties that must hold for any input:
//
//   - Classify, ReplaySafe and SessionState agree, the fast paths of the
//     main loop change nothing, and a replay-safe classification is a plain read
//     without session state;
//   - an independent, deliberately simple reading of the text (oracle
//     below) never finds a write, a second statement, a locking clause,
//     SELECT INTO, EXPLAIN ANALYZE or a denied call in a text that
//     Classify calls replay-safe;
//   - appending a newline and ";" changes nothing, and appending a second
//     statement makes a replay-safe text unsafe;
//   - a comment before or after a replay-safe text keeps it replay-safe.
func FuzzReplaySafe(f *testing.F) {
	for _, tc := range corpus {
		f.Add(tc.sql)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		v := Classify(sql)
		checkInvariants(t, sql, v)
		if ReplaySafe(sql) != v.ReplaySafe || SessionState(sql) != v.SessionState {
			t.Fatalf("ReplaySafe/SessionState disagree with Classify(%q) = %+v", sql, v)
		}
		if slow := classify(sql, false); slow != v {
			t.Fatalf("Classify(%q) = %+v with the fast paths, %+v without", sql, v, slow)
		}
		if why := oracleReject(sql); why != "" && v.ReplaySafe {
			t.Fatalf("Classify(%q) = %+v, but the oracle finds %s", sql, v, why)
		}

		w := Classify(sql + "\n;")
		if w.ReplaySafe != v.ReplaySafe || w.SessionState != v.SessionState {
			t.Fatalf("appending a newline and \";\" changed the classification of %q: %+v, then %+v", sql, v, w)
		}
		if !v.ReplaySafe {
			return
		}
		for _, tail := range []string{"\n;DELETE FROM t", "\n; SELECT 1"} {
			if ReplaySafe(sql + tail) {
				t.Fatalf("ReplaySafe(%q) = true: the second statement was not seen", sql+tail)
			}
		}
		for _, wrapped := range []string{"/* c */ " + sql, "\n" + sql + "\n-- c", sql + " /* ; DELETE */"} {
			if !ReplaySafe(wrapped) {
				t.Fatalf("ReplaySafe(%q) = true but ReplaySafe(%q) = false", sql, wrapped)
			}
		}
	})
}

// oracleReject is a second, deliberately simple and conservative reading
// of sql, written without the lexer of this package. It returns why sql
// must not be replay-safe, or "" when it finds no reason (which does not
// mean the text is safe).
//
// It abstains when sql contains a backslash: only then can an E'...'
// string end elsewhere than a plain string, and this reading does not
// tell them apart.
func oracleReject(sql string) string {
	if strings.Contains(sql, `\`) {
		return ""
	}
	toks, ok := oracleTokens(sql)
	if !ok {
		return "an unterminated literal or comment"
	}

	// Split into statements, dropping empty ones.
	var stmts [][]string
	var cur []string
	for _, tok := range toks {
		if tok == ";" {
			if len(cur) > 0 {
				stmts = append(stmts, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, tok)
	}
	if len(cur) > 0 {
		stmts = append(stmts, cur)
	}
	switch {
	case len(stmts) == 0:
		return "no statement"
	case len(stmts) > 1:
		return "more than one statement"
	}
	stmt := stmts[0]

	first := ""
	for _, tok := range stmt {
		if tok != "(" {
			first = tok
			break
		}
	}
	switch first {
	case "select", "with", "values", "table", "show", "explain":
	default:
		return "leading word " + first
	}

	if first == "explain" {
		// EXPLAIN's options come before the explained query's first word.
	options:
		for _, tok := range stmt {
			switch tok {
			case "analyze", "analyse":
				return "explain analyze"
			case "select", "with", "values", "table":
				break options
			}
		}
	}

	called := map[string]bool{
		"nextval": true, "setval": true, "currval": true, "lastval": true,
		"set_config": true, "setseed": true, "pg_notify": true,
		"pg_advisory_lock": true, "pg_advisory_xact_lock": true, "pg_advisory_unlock": true,
		"pg_advisory_unlock_all": true, "pg_try_advisory_lock": true, "pg_try_advisory_xact_lock": true,
		"txid_current": true, "pg_current_xact_id": true,
		"lo_import": true, "lo_export": true, "lo_unlink": true, "lo_create": true, "lo_put": true,
		"dblink": true, "dblink_exec": true, "dblink_connect": true,
		"pg_terminate_backend": true, "pg_cancel_backend": true, "pg_reload_conf": true,
		"pg_switch_wal": true, "pg_promote": true, "pg_create_restore_point": true,
		"pg_drop_replication_slot": true, "pg_stat_reset": true, "pg_file_write": true,
		"pg_wal_replay_pause": true, "pg_logical_emit_message": true, "pg_export_snapshot": true,
	}
	for k, tok := range stmt {
		next := ""
		if k+1 < len(stmt) {
			next = stmt[k+1]
		}
		switch tok {
		case "insert", "update", "delete", "merge":
			return "data-modifying keyword " + tok
		case "into":
			return "into"
		case "pg_temp":
			return "pg_temp"
		case "for":
			switch next {
			case "share", "no", "key":
				return "locking clause"
			}
		}
		if called[tok] && next == "(" {
			return "call of " + tok
		}
	}
	return ""
}

// oracleTokens splits sql into lower-cased words and one-byte punctuation,
// dropping comments and replacing each literal, quoted identifier and
// parameter with "0". ok is false when something is left open.
func oracleTokens(sql string) (toks []string, ok bool) {
	isWordStart := func(c byte) bool {
		return c == '_' || c >= 0x80 || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	isDigit := func(c byte) bool { return '0' <= c && c <= '9' }
	isWord := func(c byte) bool { return isWordStart(c) || isDigit(c) || c == '$' }

	rest := sql
	for rest != "" {
		c := rest[0]
		switch {
		case strings.HasPrefix(rest, "--"):
			k := strings.IndexAny(rest, "\r\n")
			if k < 0 {
				return toks, true
			}
			rest = rest[k:]

		case strings.HasPrefix(rest, "/*"):
			depth := 1
			rest = rest[2:]
			for depth > 0 {
				open, shut := strings.Index(rest, "/*"), strings.Index(rest, "*/")
				switch {
				case shut < 0:
					return nil, false
				case open >= 0 && open < shut:
					depth++
					rest = rest[open+2:]
				default:
					depth--
					rest = rest[shut+2:]
				}
			}

		case c == '\'' || c == '"':
			// Skip to the closing quote; a doubled quote does not close.
			k := 1
			for {
				n := strings.IndexByte(rest[k:], c)
				if n < 0 {
					return nil, false
				}
				k += n + 1
				if k < len(rest) && rest[k] == c {
					k++
					continue
				}
				break
			}
			rest = rest[k:]
			toks = append(toks, "0")

		case c == '$':
			k := 1
			for k < len(rest) && isDigit(rest[k]) {
				k++
			}
			if k > 1 { // $1
				toks = append(toks, "0")
				rest = rest[k:]
				break
			}
			if k < len(rest) && isWordStart(rest[k]) {
				k++
				for k < len(rest) && (isWordStart(rest[k]) || isDigit(rest[k])) {
					k++
				}
			}
			if k < len(rest) && rest[k] == '$' {
				tag := rest[:k+1]
				n := strings.Index(rest[k+1:], tag)
				if n < 0 {
					return nil, false
				}
				rest = rest[k+1+n+len(tag):]
				toks = append(toks, "0")
				break
			}
			toks = append(toks, "$")
			rest = rest[1:]

		case isWordStart(c):
			k := 1
			for k < len(rest) && isWord(rest[k]) {
				k++
			}
			toks = append(toks, strings.ToLower(rest[:k]))
			rest = rest[k:]

		case isDigit(c):
			// Digits, a fraction and an exponent, as the server's scanner
			// reads a number: to a server that accepts it at all,
			// "0e0$x$ $x$" is a number and a dollar quote.
			k := 1
			for k < len(rest) && isDigit(rest[k]) {
				k++
			}
			if k < len(rest) && rest[k] == '.' {
				k++
				for k < len(rest) && isDigit(rest[k]) {
					k++
				}
			}
			if e := k + 1; k < len(rest) && (rest[k] == 'e' || rest[k] == 'E') {
				if e < len(rest) && (rest[e] == '+' || rest[e] == '-') {
					e++
				}
				if e < len(rest) && isDigit(rest[e]) {
					for k = e; k < len(rest) && isDigit(rest[k]); k++ {
					}
				}
			}
			toks = append(toks, "0")
			rest = rest[k:]

		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			rest = rest[1:]

		default:
			toks = append(toks, rest[:1])
			rest = rest[1:]
		}
	}
	return toks, true
}

// TestOracle makes sure the oracle itself rejects what it should, so that
// a fuzzing run that finds nothing means something.
func TestOracle(t *testing.T) {
	for _, sql := range []string{
		"INSERT INTO t VALUES (1)", "select 1; select 2", "select * from t for update",
		"select * from t for share", "select * into x from t", "with d as (delete from t) select 1",
		"select nextval ('s')", "select pg_catalog.setval('s', 1)", "explain analyze select 1",
		"select 'x", "select /* x", "select $a$ x", `select "x`, "", "-- c", "set x = 1",
		"select * from pg_temp.t", "select $$a$$; delete from t",
	} {
		if oracleReject(sql) == "" {
			t.Errorf("oracleReject(%q) found nothing", sql)
		}
	}
	for _, sql := range []string{
		"select 1", "select 'delete'", `select "into"`, "select $x$ update $x$", "select 1 -- for update",
		"select /* a /* insert */ b */ 1", "select nextval from t", "select a$$ from t",
		`select E'\'' ; delete from t`, // abstains: backslash
	} {
		if why := oracleReject(sql); why != "" {
			t.Errorf("oracleReject(%q) = %q, want no finding", sql, why)
		}
	}
}
