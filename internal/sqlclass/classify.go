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

// Verdict is the result of Classify.
//
// Reason is a short constant string: "empty", "multiple statements",
// "unknown statement", an "unterminated ..." lexing failure, "nul byte",
// the leading keyword of a plain statement ("select", "insert", "set",
// "begin", ...), or what made a read unsafe: "data-modifying CTE",
// "locking clause", "select into", "select into temp", "explain analyze",
// "temporary schema", "session view", "unicode-escaped identifier",
// "unsafe function <name>".
type Verdict struct {
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
func Classify(sql string) Verdict {
	return classify(sql, true)
}

// classify is Classify. With shortcuts false it never uses
// statement.skimBody, and lexes every token through lexToken and
// statement.feed instead; the tests check that both ways agree.
func classify(sql string, shortcuts bool) Verdict {
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
				acc.add(st.verdict())
			}
			return Verdict{Kind: Unknown, SessionState: acc.session, Reason: t.text}
		case tokSemi:
			if st.started {
				acc.add(st.verdict())
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
		acc.add(st.verdict())
	}
	return acc.result()
}

// skimBody lexes a statement body from s[i] on, where no FOR or INTO is
// pending (st.after is afterNothing), and handles itself every token that
// cannot change that: white space, comments, punctuation, literals,
// numbers, parameters, "(", quoted identifiers, and words other than
// those of skimHint. It returns the first token that statement.feed must
// see, with the index just past it; at the end of s, a tokSkip.
//
// The outcome is the same as feeding every token to statement.body, which
// would make each ordinary word the name that a following "(" calls, and
// clear the name at anything else but white space and comments. Most
// bytes, though, are passed over by nextStop without being lexed, and the
// name is only worked out where it is needed, at "(" and at a comment,
// by looking back from there (nameBefore).
func (st *statement) skimBody(s string, i int) (token, int) {
	// The name as of s[i], which starts a token: s[from:to], or st.name
	// while to < 0.
	from, to := 0, -1
	for {
		p := nextStop(s, i)
		if p >= len(s) {
			return token{kind: tokSkip}, p
		}
		c := s[p]
		switch {
		case charClass[c]&classIdentStart != 0:
			j := wordEnd(s, p+1)
			if skimHint[c]&lengthBit(j-p) == 0 {
				from, to, i = p, j, j
				continue
			}
			if j > p+1 || j == len(s) || s[j] != '\'' && s[j] != '&' {
				// A word that may matter: feed looks at it, and sets the
				// name.
				return token{kind: tokWord, text: s[p:j]}, j
			}
			// One letter and a quote or "&": perhaps E'...', U&'...' or
			// U&"...", which lexToken tells apart below.
		case charClass[c]&classDigit != 0:
			from, to, i = 0, 0, numberEnd(s, p)
			continue
		case c == '(':
			if from, to = nameBefore(s, i, p, from, to); to >= 0 {
				st.name = s[from:to]
			}
			st.openParen()
			from, to, i = 0, -1, p+1
			continue
		}
		t, j := lexToken(s, p)
		switch t.kind {
		case tokSkip: // a comment: the name goes on
			from, to = nameBefore(s, i, p, from, to)
		case tokString, tokNumber, tokParam, tokOther, tokRParen:
			from, to = 0, 0
		case tokQIdent:
			st.body(t) // the name, and perhaps pg_temp or a session view
			from, to = 0, -1
		default:
			// A word, U&"...", ";" or an error: feed or classify sees
			// to them, and neither needs the name.
			return t, j
		}
		i = j
	}
}

// nameBefore returns the name as of s[p], given that s[i] starts a token,
// that the name was s[from:to] there (st.name if to < 0), and that s[i:p]
// holds only what nextStop passes over. That is the last word before p if
// nothing but white space follows it, no name (0, 0) if punctuation does,
// and the name as of s[i] if s[i:p] is all white space.
func nameBefore(s string, i, p, from, to int) (int, int) {
	q := p
	for q > i && charClass[s[q-1]]&classSpace != 0 {
		q--
	}
	switch {
	case q == i:
		return from, to
	case charClass[s[q-1]]&classIdentCont == 0:
		return 0, 0
	}
	w := q - 1
	for w > i && charClass[s[w-1]]&classIdentCont != 0 {
		w--
	}
	return w, q
}

// Stop classes, for nextStop.
const (
	// The byte always needs a look: it may start a literal, a quoted
	// identifier, a comment, a call, or the end of the statement.
	stopAlways = 1 << iota
	// The byte needs a look where a token starts with it, but not inside
	// a word: it may start a word of skimHint, a number or a parameter.
	stopAtStart
)

// stopClass holds the stop classes of each byte. stopAfter[c] holds those
// that count for the byte after c: both after a byte that cannot be part
// of a word, so that the next byte starts a token, and only stopAlways
// after one that can.
var stopClass, stopAfter = func() (class, after [256]uint8) {
	for _, c := range []byte("'\"(-/;\x00") {
		class[c] |= stopAlways
	}
	for c := 0; c < 256; c++ {
		if skimHint[c] != 0 || charClass[c]&classDigit != 0 || c == '$' {
			class[c] |= stopAtStart
		}
		after[c] = stopAlways
		if charClass[c]&classIdentCont == 0 {
			after[c] |= stopAtStart
		}
	}
	return class, after
}()

// nextStop returns the index of the first byte from s[i] on that needs a
// look (stopClass), or len(s); s[i] must start a token. The bytes before
// it are white space, punctuation other than "(", and words whose first
// letter starts no word of skimHint. Each costs three loads (the byte,
// its stop classes, and the classes that count after it) and one test;
// nothing else is remembered from one byte to the next. Eight bytes are
// taken at a time as one slice, whose bounds are checked once.
func nextStop(s string, i int) int {
	mask := uint8(stopAlways | stopAtStart) // s[i] starts a token
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8]
		switch {
		case stopClass[w[0]]&mask != 0:
			return i
		case stopClass[w[1]]&stopAfter[w[0]] != 0:
			return i + 1
		case stopClass[w[2]]&stopAfter[w[1]] != 0:
			return i + 2
		case stopClass[w[3]]&stopAfter[w[2]] != 0:
			return i + 3
		case stopClass[w[4]]&stopAfter[w[3]] != 0:
			return i + 4
		case stopClass[w[5]]&stopAfter[w[4]] != 0:
			return i + 5
		case stopClass[w[6]]&stopAfter[w[5]] != 0:
			return i + 6
		case stopClass[w[7]]&stopAfter[w[6]] != 0:
			return i + 7
		}
		mask = stopAfter[w[7]]
	}
	for ; i < len(s); i++ {
		if stopClass[s[i]]&mask != 0 {
			break
		}
		mask = stopAfter[s[i]]
	}
	return i
}

// combined folds the verdicts of the statements in one text.
type combined struct {
	n       int
	first   Verdict
	kind    Kind
	session bool
}

func (c *combined) add(v Verdict) {
	c.n++
	if c.n == 1 {
		c.first, c.kind = v, v.Kind
	} else if v.Kind.rank() > c.kind.rank() {
		c.kind = v.Kind
	}
	c.session = c.session || v.SessionState
}

func (c *combined) result() Verdict {
	switch {
	case c.n == 0:
		return Verdict{Kind: Unknown, Reason: reasonEmpty}
	case c.n > 1:
		return Verdict{Kind: c.kind, SessionState: c.session, Reason: reasonMultiple}
	}
	return c.first
}

// Reasons. Constant strings, so a Verdict never allocates.
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

func (st *statement) verdict() Verdict {
	v := Verdict{Kind: st.kind, Reason: st.reason}
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

// Words that matter inside a statement body.
type bodyWord uint8

const (
	wordOther bodyWord = iota
	wordDML            // INSERT, DELETE, MERGE
	wordUpdate
	wordInto
	wordFor
	wordNo
	wordKey
	wordShare
	wordTemp        // TEMP, TEMPORARY
	wordGlobalLocal // GLOBAL, LOCAL (INTO LOCAL TEMP t)
	wordTempSchema  // pg_temp, pg_temp_NNN
	wordSessionView // a view listing this session's own objects
)

// bodyWords lists the words bodyWordOf recognises, besides pg_temp_NNN.
var bodyWords = [...]struct {
	word string
	kind bodyWord
}{
	{"insert", wordDML}, {"delete", wordDML}, {"merge", wordDML},
	{"update", wordUpdate},
	{"into", wordInto},
	{"for", wordFor}, {"no", wordNo}, {"key", wordKey}, {"share", wordShare},
	{"temp", wordTemp}, {"temporary", wordTemp},
	{"global", wordGlobalLocal}, {"local", wordGlobalLocal},
	{"pg_temp", wordTempSchema},
	{"pg_prepared_statements", wordSessionView}, {"pg_cursors", wordSessionView},
}

// keywordHint[c] has bit lengthBit(n) set when some word of bodyWords (or
// pg_temp_NNN) starts with byte c, in either case, and has length n. A
// word whose bit is clear is an ordinary identifier, known after two
// loads; a set bit only means bodyWordOf must look.
//
// The one-letter words e and u are marked too: followed by a quote they
// start E'...', U&'...' or U&"...", which the lexer must see.
var keywordHint = hintTable(func(bodyWord) bool { return true })

// skimHint is keywordHint for the words that matter even where no FOR or
// INTO comes just before them, as in statement.skimBody. NO, KEY, SHARE,
// TEMP, TEMPORARY, GLOBAL and LOCAL only matter after one of those two,
// and are ordinary words anywhere else.
var skimHint = hintTable(func(k bodyWord) bool {
	switch k {
	case wordNo, wordKey, wordShare, wordTemp, wordGlobalLocal:
		return false
	}
	return true
})

// hintTable builds a table like keywordHint for the words of bodyWords
// whose kind keep accepts.
func hintTable(keep func(bodyWord) bool) (h [256]uint32) {
	for _, w := range bodyWords {
		if keep(w.kind) {
			h[w.word[0]] |= lengthBit(len(w.word))
			h[w.word[0]-'a'+'A'] |= lengthBit(len(w.word))
		}
	}
	for n := len("pg_temp_0"); n < 32; n++ { // pg_temp_NNN
		h['p'] |= lengthBit(n)
		h['P'] |= lengthBit(n)
	}
	for _, c := range "eEuU" {
		h[c] |= lengthBit(1)
	}
	return h
}

// lengthBit maps a word length to one of 32 bits; lengths 32 apart share
// a bit.
func lengthBit(n int) uint32 {
	return 1 << (uint(n) & 31)
}

// bodyWordsByLetter indexes bodyWords by first letter.
var bodyWordsByLetter = func() (idx [26][]uint8) {
	for i, w := range bodyWords {
		c := w.word[0] - 'a'
		idx[c] = append(idx[c], uint8(i))
	}
	return idx
}()

func bodyWordOf(w string) bodyWord {
	if w == "" || keywordHint[w[0]]&lengthBit(len(w)) == 0 {
		return wordOther
	}
	c := w[0] | 0x20
	if c < 'a' || c > 'z' {
		return wordOther
	}
	for _, k := range bodyWordsByLetter[c-'a'] {
		if equalFold(w, bodyWords[k].word) {
			return bodyWords[k].kind
		}
	}
	if c == 'p' && len(w) > 8 && equalFold(w[:8], "pg_temp_") && allDigits(w[8:]) {
		return wordTempSchema
	}
	return wordOther
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// leading describes a statement's leading keyword.
type leading struct {
	word string // lower case; also the Verdict reason
	kind Kind
	then phase
}

// leadingWords lists the leading keywords the classifier knows. Reads
// first, as they are the common case. EXPLAIN is handled separately.
var leadingWords = [...]leading{
	{word: "select", kind: Read, then: phaseBody},
	{word: "with", kind: Read, then: phaseBody},
	{word: "values", kind: Read, then: phaseBody},
	{word: "table", kind: Read, then: phaseBody},
	{word: "show", kind: Read, then: phaseBody},

	{word: "insert", kind: Write, then: phaseBody},
	{word: "update", kind: Write, then: phaseBody},
	{word: "delete", kind: Write, then: phaseBody},
	{word: "merge", kind: Write, then: phaseBody},
	{word: "copy", kind: Write, then: phaseBody},
	{word: "create", kind: Write, then: phaseCreate},
	{word: "alter", kind: Write, then: phaseBody},
	{word: "drop", kind: Write, then: phaseBody},
	{word: "truncate", kind: Write, then: phaseBody},
	{word: "grant", kind: Write, then: phaseBody},
	{word: "revoke", kind: Write, then: phaseBody},
	{word: "vacuum", kind: Write, then: phaseBody},
	{word: "analyze", kind: Write, then: phaseBody},
	{word: "analyse", kind: Write, then: phaseBody},
	{word: "call", kind: Write, then: phaseBody},
	{word: "do", kind: Write, then: phaseBody},
	{word: "lock", kind: Write, then: phaseBody},
	{word: "cluster", kind: Write, then: phaseBody},
	{word: "reindex", kind: Write, then: phaseBody},
	{word: "refresh", kind: Write, then: phaseBody},
	{word: "checkpoint", kind: Write, then: phaseBody},
	{word: "comment", kind: Write, then: phaseBody},
	{word: "security", kind: Write, then: phaseBody},
	{word: "reassign", kind: Write, then: phaseBody},
	{word: "import", kind: Write, then: phaseBody},

	{word: "set", kind: SessionChange, then: phaseBody},
	{word: "reset", kind: SessionChange, then: phaseBody},
	{word: "discard", kind: SessionChange, then: phaseBody},
	{word: "load", kind: SessionChange, then: phaseBody},
	{word: "listen", kind: SessionChange, then: phaseBody},
	{word: "unlisten", kind: SessionChange, then: phaseBody},
	{word: "notify", kind: SessionChange, then: phaseBody},
	{word: "prepare", kind: SessionChange, then: phasePrepare},
	{word: "execute", kind: SessionChange, then: phaseBody},
	{word: "deallocate", kind: SessionChange, then: phaseBody},
	{word: "declare", kind: SessionChange, then: phaseBody},
	{word: "fetch", kind: SessionChange, then: phaseBody},
	{word: "move", kind: SessionChange, then: phaseBody},
	{word: "close", kind: SessionChange, then: phaseBody},

	{word: "begin", kind: TxControl, then: phaseBody},
	{word: "start", kind: TxControl, then: phaseBody},
	{word: "commit", kind: TxControl, then: phaseBody},
	{word: "end", kind: TxControl, then: phaseBody},
	{word: "rollback", kind: TxControl, then: phaseBody},
	{word: "abort", kind: TxControl, then: phaseBody},
	{word: "savepoint", kind: TxControl, then: phaseBody},
	{word: "release", kind: TxControl, then: phaseBody},
}

func lookupLeading(w string) *leading {
	for i := range leadingWords {
		if equalFold(w, leadingWords[i].word) {
			return &leadingWords[i]
		}
	}
	return nil
}

// equalFold reports whether s equals lower, which must be lower-case
// ASCII, ignoring ASCII case in s. It does not allocate.
func equalFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
