package sqlclass

import "strings"

// This file holds the lexer: one forward pass over the bytes of the SQL
// text, following the token rules of the PostgreSQL server's own scanner
// closely enough that a keyword is never taken from inside a literal,
// a quoted identifier or a comment, and never missed outside one.
//
// Where the server's rules changed between major versions (digits
// followed by letters, "_" in numbers, vertical tab as white space) the
// lexer either follows the older, more permissive rule or splits tokens
// more finely than the server does. Either way the difference can only
// turn a read into "not replay-safe", or touch text that the server
// rejects as a syntax error before running any of it.
//
// Strings are assumed to be lexed with standard_conforming_strings = on,
// the server default since PostgreSQL 9.1 and a requirement of pgx's
// simple protocol: a backslash is an escape only inside E'...'.

type tokKind uint8

const (
	tokWord   tokKind = iota // unquoted identifier or keyword; text is the word
	tokQIdent                // "quoted identifier"; text is the body without the quotes
	tokUIdent                // U&"quoted identifier" with Unicode escapes
	tokString                // any string literal: '', E'', U&'', B'', X'', $tag$
	tokNumber                // numeric literal
	tokParam                 // positional parameter $n
	tokLParen                // (
	tokRParen                // )
	tokSemi                  // ;
	tokOther                 // any other punctuation or operator byte
	tokError                 // lexing failed; text is the reason
	tokSkip                  // a comment
)

type token struct {
	kind tokKind
	text string
}

// Character classes, indexed by byte.
const (
	classSpace      = 1 << iota // white space between tokens
	classIdentStart             // may start an identifier or a dollar-quote tag
	classIdentCont              // may continue an identifier (includes '$')
	classTagCont                // may continue a dollar-quote tag (no '$')
	classDigit
)

var charClass = func() (t [256]uint8) {
	for _, c := range []byte(" \t\n\r\f\v") {
		t[c] |= classSpace
	}
	for c := 0; c < 256; c++ {
		isLetter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
		isDigit := c >= '0' && c <= '9'
		if isLetter {
			t[c] |= classIdentStart | classIdentCont | classTagCont
		}
		if isDigit {
			t[c] |= classIdentCont | classTagCont | classDigit
		}
	}
	t['$'] |= classIdentCont
	return t
}()

// lexToken lexes the token that starts at s[i], which is not white space,
// and returns it with the index just past it. Comments come back as
// tokSkip. Classify skips white space itself, and in a statement body
// passes over most words and punctuation without lexing them (see
// statement.skimBody); everything else is lexed here.
func lexToken(s string, i int) (token, int) {
	c := s[i]
	switch {
	case c == '-' && i+1 < len(s) && s[i+1] == '-':
		return token{kind: tokSkip}, lineEnd(s, i+2)

	case c == '/' && i+1 < len(s) && s[i+1] == '*':
		end, ok := blockCommentEnd(s, i+2)
		if !ok {
			return token{kind: tokError, text: reasonOpenComment}, len(s)
		}
		return token{kind: tokSkip}, end

	case charClass[c]&classIdentStart != 0:
		if i+1 < len(s) {
			lc := c | 0x20 // ASCII lower case; only 'E'/'e' and 'U'/'u' matter here
			switch {
			case lc == 'e' && s[i+1] == '\'':
				end, ok := eStringEnd(s, i+2)
				if !ok {
					return token{kind: tokError, text: reasonOpenString}, len(s)
				}
				return token{kind: tokString}, end
			case lc == 'u' && s[i+1] == '&' && i+2 < len(s) && s[i+2] == '\'':
				// U&'...' lexes like a plain string: quotes are doubled and
				// the escape character never escapes a quote.
				end, ok := quotedEnd(s, i+3, '\'')
				if !ok {
					return token{kind: tokError, text: reasonOpenString}, len(s)
				}
				return token{kind: tokString}, end
			case lc == 'u' && s[i+1] == '&' && i+2 < len(s) && s[i+2] == '"':
				end, ok := quotedEnd(s, i+3, '"')
				if !ok {
					return token{kind: tokError, text: reasonOpenIdent}, len(s)
				}
				return token{kind: tokUIdent, text: s[i+3 : end-1]}, end
			}
		}
		j := wordEnd(s, i+1)
		return token{kind: tokWord, text: s[i:j]}, j

	case c == '\'':
		// B'', X'' and N'' arrive here too, after their one-letter word:
		// they lex exactly like a plain string.
		end, ok := quotedEnd(s, i+1, '\'')
		if !ok {
			return token{kind: tokError, text: reasonOpenString}, len(s)
		}
		return token{kind: tokString}, end

	case c == '"':
		end, ok := quotedEnd(s, i+1, '"')
		if !ok {
			return token{kind: tokError, text: reasonOpenIdent}, len(s)
		}
		return token{kind: tokQIdent, text: s[i+1 : end-1]}, end

	case charClass[c]&classDigit != 0:
		return token{kind: tokNumber}, numberEnd(s, i)

	case c == '$':
		j := i + 1
		if j < len(s) && charClass[s[j]]&classDigit != 0 {
			for j < len(s) && charClass[s[j]]&classDigit != 0 {
				j++
			}
			return token{kind: tokParam}, j
		}
		if j < len(s) && charClass[s[j]]&classIdentStart != 0 {
			j++
			for j < len(s) && charClass[s[j]]&classTagCont != 0 {
				j++
			}
		}
		if j < len(s) && s[j] == '$' {
			delim := s[i : j+1]
			k := strings.Index(s[j+1:], delim)
			if k < 0 {
				return token{kind: tokError, text: reasonOpenDollar}, len(s)
			}
			return token{kind: tokString}, j + 1 + k + len(delim)
		}
		// A lone '$' (or '$' + a tag that is never closed): the server
		// returns the '$' by itself and rescans what follows.
		return token{kind: tokOther}, i + 1

	case c == '(':
		return token{kind: tokLParen}, i + 1
	case c == ')':
		return token{kind: tokRParen}, i + 1
	case c == ';':
		return token{kind: tokSemi}, i + 1
	case c == 0:
		// The protocol ends the query text at a NUL byte, so the server
		// would see less than we do. Refuse to guess.
		return token{kind: tokError, text: reasonNUL}, len(s)
	}
	// Operators are returned one byte at a time. That is finer than the
	// server, which joins operator characters, but comment starts are
	// checked before every byte, just as the server cuts an operator
	// before "--" or "/*".
	return token{kind: tokOther}, i + 1
}

// wordEnd returns the index just past the identifier characters from i.
func wordEnd(s string, i int) int {
	for i < len(s) && charClass[s[i]]&classIdentCont != 0 {
		i++
	}
	return i
}

// lineEnd returns the index of the newline that ends a "--" comment
// whose body starts at i, or len(s).
func lineEnd(s string, i int) int {
	for i < len(s) && s[i] != '\n' && s[i] != '\r' {
		i++
	}
	return i
}

// blockCommentEnd returns the index just past the "*/" that closes a
// block comment whose body starts at i. Block comments nest.
func blockCommentEnd(s string, i int) (int, bool) {
	depth := 1
	for i+1 < len(s) {
		switch {
		case s[i] == '*' && s[i+1] == '/':
			i += 2
			depth--
			if depth == 0 {
				return i, true
			}
		case s[i] == '/' && s[i+1] == '*':
			i += 2
			depth++
		default:
			i++
		}
	}
	return len(s), false
}

// quotedEnd returns the index just past the closing quote q of a literal
// or quoted identifier whose body starts at i; a doubled quote is part of
// the body.
func quotedEnd(s string, i int, q byte) (int, bool) {
	for {
		k := strings.IndexByte(s[i:], q)
		if k < 0 {
			return len(s), false
		}
		i += k + 1
		if i < len(s) && s[i] == q {
			i++
			continue
		}
		return i, true
	}
}

// eStringEnd returns the index just past an E'...' string whose body
// starts at i. A backslash escapes the byte after it (every escape form
// the server knows is a backslash, one byte that is never taken as a
// quote, then only digits or letters), and a doubled quote is a quote.
//
// A string followed by white space that contains a newline and then
// another quote continues in that next quoted segment, and the server
// keeps lexing the continuation with the escape rules of the first
// segment. That matters only here: for a plain string, the continuation
// lexes the same as a new string would.
func eStringEnd(s string, i int) (int, bool) {
	for {
		for i < len(s) {
			c := s[i]
			if c == '\\' {
				i += 2
				continue
			}
			if c == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					i += 2
					continue
				}
				break
			}
			i++
		}
		if i >= len(s) {
			return len(s), false
		}
		i++ // the closing quote
		q, ok := continuation(s, i)
		if !ok {
			return i, true
		}
		i = q + 1
	}
}

// continuation reports whether the literal that closed just before i is
// continued: white space and "--" comments containing at least one
// newline, then a quote. It returns the index of that quote.
//
// The server's rule is slightly narrower (only some of the white space may
// come before the first newline, and older servers do not take a vertical
// tab as white space). Where this function continues a literal that the
// server would not, the server sees two string constants in a row, which
// is a syntax error, so nothing runs.
func continuation(s string, i int) (int, bool) {
	newline := false
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\n' || c == '\r':
			newline = true
			i++
		case charClass[c]&classSpace != 0:
			i++
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			i = lineEnd(s, i+2)
		case c == '\'' && newline:
			return i, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// numberEnd returns the index just past a numeric literal starting with
// the digit at i: digits and dots, then an exponent marker if digits
// follow it. Nothing else joins the number, which is how servers before
// PostgreSQL 15 and 16 lex it: "1into" is the number 1 and then the word
// into, and "1_000" or "0x1F" are 1 and 0 followed by an identifier.
// Newer servers read 1_000 and 0x1F as numbers and reject the rest, so
// where the versions differ this lexer sees an identifier, which may
// swallow a following '$'; a newer server sees a number and then perhaps
// a dollar quote. Seeing code where a server sees a literal only makes a
// text less replay-safe; the reverse would be a bug.
func numberEnd(s string, i int) int {
	for i < len(s) && (charClass[s[i]]&classDigit != 0 || s[i] == '.') {
		i++
	}
	if i < len(s) && s[i]|0x20 == 'e' {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && charClass[s[j]]&classDigit != 0 {
			for j < len(s) && charClass[s[j]]&classDigit != 0 {
				j++
			}
			return j
		}
	}
	return i
}
