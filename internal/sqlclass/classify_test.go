package sqlclass

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestCorpus(t *testing.T) {
	if len(corpus) < 150 {
		t.Fatalf("corpus has %d statements, want at least 150", len(corpus))
	}
	seen := make(map[string]bool, len(corpus))
	for _, tc := range corpus {
		if seen[tc.sql] {
			t.Errorf("duplicate corpus entry %q", tc.sql)
		}
		seen[tc.sql] = true

		v := Classify(tc.sql)
		if v.ReplaySafe != tc.safe || v.SessionState != tc.session ||
			tc.reason != "" && v.Reason != tc.reason {
			t.Errorf("Classify(%q) = %+v; want ReplaySafe=%v SessionState=%v Reason=%q",
				tc.sql, v, tc.safe, tc.session, tc.reason)
		}
		if got := ReplaySafe(tc.sql); got != v.ReplaySafe {
			t.Errorf("ReplaySafe(%q) = %v, Classify says %v", tc.sql, got, v.ReplaySafe)
		}
		if got := SessionState(tc.sql); got != v.SessionState {
			t.Errorf("SessionState(%q) = %v, Classify says %v", tc.sql, got, v.SessionState)
		}
		checkInvariants(t, tc.sql, v)
		if slow := classify(tc.sql, false); slow != v {
			t.Errorf("Classify(%q) = %+v with the fast paths, %+v without", tc.sql, v, slow)
		}
	}
}

// checkInvariants holds for every input.
func checkInvariants(t *testing.T, sql string, v Classification) {
	t.Helper()
	if v.Reason == "" {
		t.Errorf("Classify(%q): empty reason", sql)
	}
	if v.ReplaySafe && (v.Kind != Read || v.SessionState) {
		t.Errorf("Classify(%q) = %+v: replay-safe but not a plain read", sql, v)
	}
	if v.Kind == SessionChange || v.Kind == TxControl {
		if !v.SessionState {
			t.Errorf("Classify(%q) = %+v: kind %v without session state", sql, v, v.Kind)
		}
	}
}

func TestKinds(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		kind Kind
	}{
		{`SELECT 1`, Read},
		{`EXPLAIN ANALYZE SELECT 1`, Read}, // a read, but it runs, so not replayed
		{`SELECT * FROM t FOR UPDATE`, Write},
		{`WITH d AS (DELETE FROM t RETURNING 1) SELECT 1`, Write},
		{`SELECT nextval('s')`, Write},
		{`SELECT currval('s')`, SessionChange},
		{`SELECT * INTO TEMP x FROM t`, SessionChange},
		{`INSERT INTO t VALUES (1)`, Write},
		{`SET x = 1`, SessionChange},
		{`CREATE TEMP TABLE x (a int)`, SessionChange},
		{`BEGIN`, TxControl},
		{`PREPARE TRANSACTION 'x'`, TxControl},
		{`SELECT 1; INSERT INTO t VALUES (1)`, Write},
		{`INSERT INTO t VALUES (1); SET x = 1`, SessionChange},
		{`BEGIN; SET LOCAL x = 1; COMMIT`, TxControl},
		{`SELECT 1; FOO`, Unknown},
		{`FOO`, Unknown},
		{``, Unknown},
		{`SELECT '`, Unknown},
		{`SELECT U&"x"`, Unknown},
	} {
		if got := Classify(tc.sql).Kind; got != tc.kind {
			t.Errorf("Classify(%q).Kind = %v, want %v", tc.sql, got, tc.kind)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{
		Unknown: "unknown", Read: "read", Write: "write",
		SessionChange: "session", TxControl: "transaction", Kind(9): "Kind(9)",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

// TestDeniedFunctions calls every entry of the deny list in several
// spellings, and checks that the same names are harmless when not called.
func TestDeniedFunctions(t *testing.T) {
	for _, f := range deniedFunctions {
		name := f.name
		if f.prefix {
			name += "x"
		}
		forms := []string{
			"SELECT " + name + "(1)",
			"SELECT " + strings.ToUpper(name) + " (1)",
			"SELECT pg_catalog." + name + "(1)",
			`SELECT "pg_catalog"."` + name + `"(1)`,
			"SELECT 1 FROM t WHERE x IN (SELECT " + name + " /* c */ (1))",
			"VALUES (" + name + "\n(1))",
			"WITH c AS (SELECT * FROM " + name + "(1)) SELECT * FROM c",
		}
		for _, sql := range forms {
			v := Classify(sql)
			if v.ReplaySafe || v.Reason != f.reason || v.SessionState != f.session {
				t.Errorf("Classify(%q) = %+v; want not replay-safe, SessionState=%v, Reason=%q",
					sql, v, f.session, f.reason)
			}
			wantKind := SessionChange
			if f.write {
				wantKind = Write
			}
			if v.Kind != wantKind {
				t.Errorf("Classify(%q).Kind = %v, want %v", sql, v.Kind, wantKind)
			}
		}
		for _, sql := range []string{
			"SELECT " + name + " FROM t",
			"SELECT t." + name + ", '" + name + "(1)' FROM t",
			"SELECT 1 -- " + name + "(1)",
			"SELECT $$" + name + "(1)$$",
		} {
			if !ReplaySafe(sql) {
				t.Errorf("ReplaySafe(%q) = false, want true: %s is not called", sql, f.name)
			}
		}
	}
}

func TestDeniedTable(t *testing.T) {
	seen := map[string]bool{}
	for i, f := range deniedFunctions {
		if f.name != strings.ToLower(f.name) || f.name[0] < 'a' || f.name[0] > 'z' {
			t.Errorf("entry %d: name %q must be lower case and start with a letter", i, f.name)
		}
		if seen[f.name] {
			t.Errorf("entry %d: duplicate name %q", i, f.name)
		}
		seen[f.name] = true
		want := "unsafe function " + f.name
		if f.prefix {
			want += "*"
		}
		if f.reason != want {
			t.Errorf("entry %d: reason %q, want %q", i, f.reason, want)
		}
		if !f.write && !f.session {
			t.Errorf("entry %d (%s): neither write nor session", i, f.name)
		}
		// No entry may be shadowed by an earlier prefix.
		if got := lookupDenied(f.name); got != &deniedFunctions[i] {
			t.Errorf("lookupDenied(%q) found %q, want its own entry", f.name, got.name)
		}
	}
	if len(deniedFunctions) > 255 {
		t.Errorf("deniedByLetter stores indexes as uint8; the list has %d entries", len(deniedFunctions))
	}
	for _, name := range []string{"", "lo", "lower", "count", "coalesce", "pg_sleep", "random",
		"txid_current_if_assigned", "pg_current_xact_id_if_assigned", "current_setting",
		"pg_read_file", "pg_get_wal_replay_pause_state", "nextvalx", "xnextval", "_nextval", "9lo_x"} {
		if f := lookupDenied(name); f != nil {
			t.Errorf("lookupDenied(%q) = %q, want no match", name, f.name)
		}
	}
}

// TestSkimBody puts calls and near-calls after every kind of token that
// statement.skimBody handles or hands on, with white space and comments
// in between, and checks that it agrees with lexing every token. It looks
// back from "(" to find the name, so what comes before the name matters.
func TestSkimBody(t *testing.T) {
	heads := []string{"select ", "SELECT a, ", "select * from t where ", "with x as (select ", "select ("}
	before := []string{"", "1", "1.5", "1e5", "$1", "'a'", "e'a'", "x'1'", `"q"`, "/* c */", "-- c\n", ")",
		",", "-", "/", "a ", "a, ", "t.", "into ", "for ", "no ", "limit ", "$x$ $x$", "1into ", "a$ "}
	names := []string{"nextval", "NEXTVAL", "x.nextval", "pg_advisory_lock", "setval", "f", "dblink_exec", "currval", `"setval"`}
	between := []string{"", " ", "/* c */", " /* c */ ", "-- c\n", "\n", "\t", " /**/ /**/ ", ",", "-", ")"}
	for _, head := range heads {
		for _, b := range before {
			for _, name := range names {
				for _, w := range between {
					for _, sql := range []string{
						head + b + name + w + "('s')",
						head + b + w + name + w + "(1) " + b,
					} {
						if fast, slow := classify(sql, true), classify(sql, false); fast != slow {
							t.Errorf("Classify(%q) = %+v with skimBody, %+v without", sql, fast, slow)
						}
					}
				}
			}
		}
	}
	for sql, want := range map[string]bool{
		"SELECT nextval /* c */ ('s')":      false,
		"SELECT nextval -- c\n('s')":        false,
		"SELECT 1nextval('s')":              false, // a number, then a word
		"SELECT $1nextval('s')":             false,
		"SELECT 'x'nextval('s')":            false,
		"SELECT nextval, ('s')":             true,
		"SELECT nextval) ('s')":             true,
		"SELECT x.nextval ('s')":            false,
		"SELECT nextval$('s')":              true, // another name
		"SELECT a FROM t WHERE no AND key":  true,
		"SELECT a FROM t FOR NO KEY UPDATE": false,
		"SELECT temp, local, global FROM t": true,
		"SELECT * INTO LOCAL TEMP x FROM t": false,
		"SELECT * FROM pg_temp.t":           false,
		"SELECT limit1, share FROM delete1": true,
		"SELECT a = e'\\' x":                false, // the E string does not end
	} {
		if got := ReplaySafe(sql); got != want {
			t.Errorf("ReplaySafe(%q) = %v, want %v", sql, got, want)
		}
	}
}

// TestAppendedStatement checks statement splitting after every corpus
// entry that is replay-safe: anything after a new line and ";" is a
// second statement.
func TestAppendedStatement(t *testing.T) {
	for _, tc := range corpus {
		if !tc.safe {
			continue
		}
		for _, tail := range []string{"\n;DELETE FROM t", "\n; SELECT 1", "\n;", "\n;;\n"} {
			sql := tc.sql + tail
			want := tail == "\n;" || tail == "\n;;\n"
			if got := ReplaySafe(sql); got != want {
				t.Errorf("ReplaySafe(%q) = %v, want %v", sql, got, want)
			}
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	for _, sql := range []string{benchSQL, `SELECT nextval('s'); SET x = 1`, `SELECT 'x`, ``} {
		if n := testing.AllocsPerRun(100, func() { Classify(sql) }); n != 0 {
			t.Errorf("Classify(%q) allocates %v times per run, want 0", sql, n)
		}
	}
}
