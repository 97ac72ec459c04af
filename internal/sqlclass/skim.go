package sqlclass

// This file holds the fast path of a statement body: skimBody passes over
// the bytes that cannot change a classification without lexing them, and hands on
// to statement.feed only the tokens it must see. classify(sql, false)
// lexes every token instead, and the tests check that both agree.

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
