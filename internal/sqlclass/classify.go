package sqlclass

import "strconv"

// Kind is the broad class of a statement.
type Kind uint8

const (
	// Unknown: the text is empty, does not lex, starts with a word the
	// classifier does not know, or uses a construct it cannot see through.
	Unknown Kind = iota
	// Read: SELECT, WITH, VALUES, TABLE, SHOW, or EXPLAIN of one of them.
	Read
	// Write: changes data, schema or server state, or takes row locks.
	Write
	// SessionChange: changes or depends on state kept by the session.
	SessionChange
	// TxControl: BEGIN, COMMIT, ROLLBACK, SAVEPOINT and friends.
	TxControl
)

// String returns a short lower-case name suitable as a metric label.
func (k Kind) String() string {
	switch k {
	case Unknown:
		return "unknown"
	case Read:
		return "read"
	case Write:
		return "write"
	case SessionChange:
		return "session"
	case TxControl:
		return "transaction"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// rank orders kinds for a text holding several statements: the result
// is the most significant kind among them.
func (k Kind) rank() int {
	if k == Unknown {
		return 5
	}
	return int(k)
}

// Classification is the result of Classify.
//
// Reason is a short constant string: "empty", "multiple statements",
// "unknown statement", an "unterminated ..." lexing failure, "nul byte",
// the leading keyword of a plain statement ("select", "insert", "set",
// "begin", ...), or what made a read unsafe: "data-modifying CTE",
// "locking clause", "select into", "select into temp", "explain analyze",
// "temporary schema", "session view", "unicode-escaped identifier",
// "unsafe function <name>".
type Classification struct {
	Kind         Kind
	ReplaySafe   bool
	SessionState bool
	Reason       string
}

// ReplaySafe reports whether sql is a single statement that only reads
// and may be run again on another server.
func ReplaySafe(sql string) bool {
	return Classify(sql).ReplaySafe
}

// SessionState reports whether sql changes or depends on session state:
// SET, RESET, DISCARD, LOAD, LISTEN, UNLISTEN, NOTIFY, PREPARE, EXECUTE,
// DEALLOCATE, cursors (DECLARE, FETCH, MOVE, CLOSE), transaction control,
// CREATE TEMP ..., SELECT INTO TEMP, a name in the pg_temp schema, the
// pg_prepared_statements and pg_cursors views, or a call of a function
// such as set_config, currval, pg_notify or an advisory lock. For a text
// with several statements it reports whether any of them does; for one
// that does not lex, whether the statements before the failure do.
func SessionState(sql string) bool {
	return Classify(sql).SessionState
}

// Classify lexes sql once and returns its kind, whether it is
// replay-safe, whether it touches session state, and why.
func Classify(sql string) Classification {
	return classify(sql, true)
}

// classify is Classify. With shortcuts false it never uses
// statement.skimBody, and lexes every token through lexToken and
// statement.feed instead; the tests check that both ways agree.
func classify(sql string, shortcuts bool) Classification {
	var (
		st  statement
		acc combined
		s   = sql
		i   = 0
		// fast caches st.phase == phaseBody && st.after == afterNothing:
		// in a body, with no two-word pattern under way.
		fast = false
	)
	// The loop skips white space itself. In a statement body, which is
	// most of a query, skimBody lexes the text and hands on only the
	// tokens that feed must see; elsewhere every token goes through
	// lexToken and feed.
	for i < len(s) {
		if charClass[s[i]]&classSpace != 0 {
			for i++; i < len(s) && charClass[s[i]]&classSpace != 0; i++ {
			}
			continue
		}
		var t token
		if fast {
			t, i = st.skimBody(s, i)
		} else {
			t, i = lexToken(s, i)
		}
		switch t.kind {
		case tokSkip:
			continue
		case tokError:
			// Keep what the statements so far say about session state; the
			// server refuses the whole text, so nothing is replay-safe.
			if st.started {
				acc.add(st.classification())
			}
			return Classification{Kind: Unknown, SessionState: acc.session, Reason: t.text}
		case tokSemi:
			if st.started {
				acc.add(st.classification())
				st = statement{}
				fast = false
			}
			continue
		}
		st.started = true
		st.feed(t)
		fast = shortcuts && st.phase == phaseBody && st.after == afterNothing
	}
	if st.started {
		acc.add(st.classification())
	}
	return acc.result()
}

// combined folds the classifications of the statements in one text.
type combined struct {
	n       int
	first   Classification
	kind    Kind
	session bool
}

func (c *combined) add(v Classification) {
	c.n++
	if c.n == 1 {
		c.first, c.kind = v, v.Kind
	} else if v.Kind.rank() > c.kind.rank() {
		c.kind = v.Kind
	}
	c.session = c.session || v.SessionState
}

func (c *combined) result() Classification {
	switch {
	case c.n == 0:
		return Classification{Kind: Unknown, Reason: reasonEmpty}
	case c.n > 1:
		return Classification{Kind: c.kind, SessionState: c.session, Reason: reasonMultiple}
	}
	return c.first
}

// Reasons. Constant strings, so a Classification never allocates.
const (
	reasonEmpty          = "empty"
	reasonMultiple       = "multiple statements"
	reasonUnknown        = "unknown statement"
	reasonDML            = "data-modifying CTE"
	reasonLocking        = "locking clause"
	reasonSelectInto     = "select into"
	reasonSelectIntoTemp = "select into temp"
	reasonExplain        = "explain"
	reasonExplainAnalyze = "explain analyze"
	reasonTempSchema     = "temporary schema"
	reasonSessionView    = "session view"
	reasonUnicodeIdent   = "unicode-escaped identifier"
	reasonCreateTemp     = "create temp"
	reasonPrepareTx      = "prepare transaction"
	reasonOpenComment    = "unterminated comment"
	reasonOpenString     = "unterminated string"
	reasonOpenIdent      = "unterminated quoted identifier"
	reasonOpenDollar     = "unterminated dollar quote"
	reasonNUL            = "nul byte"
)
