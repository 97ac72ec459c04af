package sqlclass

// This file holds what one statement's tokens reveal: the leading words
// (EXPLAIN, CREATE TEMP, PREPARE TRANSACTION), the body's two-word
// patterns (FOR UPDATE, INTO TEMP), the calls of denied functions, and
// the classification they add up to.

// phase is where a statement is in its leading words.
type phase uint8

const (
	phaseLead        phase = iota // waiting for the leading keyword; "(" is skipped
	phaseExplain                  // after EXPLAIN: ANALYZE, VERBOSE, "(" or the statement
	phaseExplainOpt               // just after "EXPLAIN (": options or a parenthesised query?
	phaseExplainOpts              // inside EXPLAIN's option list
	phaseCreate                   // after CREATE: OR REPLACE, GLOBAL, LOCAL, TEMP?
	phasePrepare                  // after PREPARE: TRANSACTION?
	phaseBody                     // everything else
)

// statement collects what one statement's tokens reveal.
type statement struct {
	started bool
	phase   phase
	kind    Kind   // from the leading keyword
	reason  string // from the leading keyword
	read    bool   // the leading keyword starts a read; the body decides

	explain        bool
	explainAnalyze bool
	optDepth       int // parenthesis depth inside EXPLAIN ( ... )

	// Two-word patterns: the previous body token.
	name  string // previous token was a word or quoted identifier: its text
	after after  // previous words were FOR [NO] [KEY], or INTO [GLOBAL|LOCAL]

	dml       bool   // INSERT, UPDATE, DELETE or MERGE in the body
	lock      bool   // FOR UPDATE / NO KEY UPDATE / SHARE / KEY SHARE
	intos     int    // INTO seen
	tempIntos int    // INTO TEMP / TEMPORARY seen
	uident    bool   // a U&"..." identifier: the name it spells is hidden
	writeFn   string // reason of the first called function with effects
	session   string // reason of the first session dependence in the body
}

func (st *statement) feed(t token) {
	switch st.phase {
	case phaseLead:
		st.lead(t)
	case phaseExplain:
		if t.kind == tokWord {
			switch {
			case equalFold(t.text, "analyze"), equalFold(t.text, "analyse"):
				st.explainAnalyze = true
				return
			case equalFold(t.text, "verbose"):
				return
			}
		}
		if t.kind == tokLParen {
			st.phase = phaseExplainOpt
			return
		}
		st.lead(t)
	case phaseExplainOpt:
		// "EXPLAIN (" starts either an option list or a parenthesised
		// query; a query starts with one of these or another "(".
		if t.kind == tokLParen || t.kind == tokWord && (equalFold(t.text, "select") ||
			equalFold(t.text, "values") || equalFold(t.text, "with") || equalFold(t.text, "table")) {
			st.phase = phaseLead
			st.lead(t)
			return
		}
		st.phase = phaseExplainOpts
		st.optDepth = 1
		st.explainOption(t)
	case phaseExplainOpts:
		st.explainOption(t)
	case phaseCreate:
		if t.kind == tokWord {
			switch {
			case equalFold(t.text, "or"), equalFold(t.text, "replace"),
				equalFold(t.text, "global"), equalFold(t.text, "local"):
				return
			case equalFold(t.text, "temp"), equalFold(t.text, "temporary"):
				st.kind, st.reason = SessionChange, reasonCreateTemp
				st.phase = phaseBody
				return
			}
		}
		st.phase = phaseBody
		st.body(t)
	case phasePrepare:
		st.phase = phaseBody
		if t.kind == tokWord && equalFold(t.text, "transaction") {
			st.kind, st.reason = TxControl, reasonPrepareTx
			return
		}
		st.body(t)
	default:
		st.body(t)
	}
}

// lead handles the token that should be the statement's leading keyword.
func (st *statement) lead(t token) {
	switch t.kind {
	case tokLParen:
		return // (SELECT ...), ((VALUES ...)): the keyword is further on
	case tokWord:
		if equalFold(t.text, "explain") && !st.explain {
			st.explain = true
			st.phase = phaseExplain
			return
		}
		if l := lookupLeading(t.text); l != nil {
			st.kind, st.reason, st.read = l.kind, l.word, l.kind == Read
			if st.explain && st.read {
				st.reason = reasonExplain
			}
			st.phase = l.then
			return
		}
	}
	st.kind, st.reason = Unknown, reasonUnknown
	st.phase = phaseBody
}

func (st *statement) explainOption(t token) {
	switch t.kind {
	case tokWord:
		if equalFold(t.text, "analyze") || equalFold(t.text, "analyse") {
			st.explainAnalyze = true
		}
	case tokLParen:
		st.optDepth++
	case tokRParen:
		st.optDepth--
		if st.optDepth == 0 {
			st.phase = phaseLead
		}
	}
}

// body scans the tokens after the leading keyword.
func (st *statement) body(t token) {
	if t.kind == tokLParen {
		st.openParen()
		return
	}
	name := ""
	prev := st.after
	st.after = afterNothing

	switch t.kind {
	case tokWord:
		name = t.text
		switch bodyWordOf(t.text) {
		case wordFor:
			st.after = afterFor
		case wordNo, wordKey:
			if prev == afterFor {
				st.lock = true
				st.after = afterFor
			}
		case wordShare:
			if prev == afterFor {
				st.lock = true
			}
		case wordUpdate:
			if prev == afterFor {
				st.lock = true
			} else {
				st.dml = true
			}
		case wordDML:
			st.dml = true
		case wordInto:
			st.intos++
			st.after = afterInto
		case wordGlobalLocal:
			if prev == afterInto {
				st.after = afterInto
			}
		case wordTemp:
			if prev == afterInto {
				st.tempIntos++
			}
		case wordTempSchema:
			st.noteSession(reasonTempSchema)
		case wordSessionView:
			st.noteSession(reasonSessionView)
		}
	case tokQIdent:
		name = t.text
		switch bodyWordOf(t.text) {
		case wordTempSchema:
			st.noteSession(reasonTempSchema)
		case wordSessionView:
			st.noteSession(reasonSessionView)
		}
	case tokUIdent:
		st.uident = true
	}
	st.name = name
}

// openParen handles "(" in the body: if the previous token was a name,
// this is a call of it.
func (st *statement) openParen() {
	if st.name != "" {
		if f := lookupDenied(st.name); f != nil {
			if f.write && st.writeFn == "" {
				st.writeFn = f.reason
			}
			if f.session {
				st.noteSession(f.reason)
			}
		}
	}
	st.name, st.after = "", afterNothing
}

func (st *statement) noteSession(reason string) {
	if st.session == "" {
		st.session = reason
	}
}

func (st *statement) classification() Classification {
	v := Classification{Kind: st.kind, Reason: st.reason}
	if v.Reason == "" {
		// The text ended before a leading keyword: "(", "EXPLAIN", ...
		v.Reason = reasonUnknown
	}
	session := st.session
	if session == "" && st.tempIntos > 0 {
		session = reasonSelectIntoTemp
	}
	if st.read {
		write := ""
		switch {
		case st.dml:
			write = reasonDML
		case st.intos > st.tempIntos:
			write = reasonSelectInto
		case st.lock:
			write = reasonLocking
		case st.writeFn != "":
			write = st.writeFn
		}
		switch {
		case write != "":
			v.Kind, v.Reason = Write, write
		case session != "":
			v.Kind, v.Reason = SessionChange, session
		case st.uident:
			v.Kind, v.Reason = Unknown, reasonUnicodeIdent
		}
		v.ReplaySafe = v.Kind == Read && !st.explainAnalyze
	}
	if st.explainAnalyze {
		v.Reason = reasonExplainAnalyze
	}
	v.SessionState = session != "" || v.Kind == SessionChange || v.Kind == TxControl
	return v
}

// after remembers the words before the current one, for two-word patterns.
type after uint8

const (
	afterNothing after = iota
	afterFor           // FOR, FOR NO, FOR KEY, FOR NO KEY
	afterInto          // INTO, INTO GLOBAL, INTO LOCAL
)
