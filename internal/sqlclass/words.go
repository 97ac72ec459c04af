package sqlclass

// This file holds the words the classifier knows: the leading keywords of
// statements and the words that matter inside a body, with the tables that
// let most identifiers be passed over after two loads.

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
	word string // lower case; also the Classification reason
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
