package failover

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgfailover/pgfailover/failover/internal/connkeys"
)

// ConfigError reports a connection string that ParseConfig cannot use.
// Error() names the key at fault and never contains the connection string
// or a password.
type ConfigError struct {
	// Key is the connection-string key at fault. It is "" when pgx itself
	// rejected the string; Msg then carries pgx's explanation, which names
	// the key when pgx knows it.
	Key string
	// Msg says what is wrong. It has been checked for the password.
	Msg string
	// Err is the underlying cause, if any, for errors.Is and errors.As; its
	// text is not part of Error(). When pgx rejected the string, Err is
	// pgx's *pgconn.ParseConfigError with its ConnString field cleared.
	Err error
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("pgfailover: invalid connection string: ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *ConfigError) Unwrap() error { return e.Err }

// parseState carries what ParseConfig needs to build safe errors.
type parseState struct {
	// secrets are strings that must not appear in an error message: the
	// password as written and as decoded, and the sslpassword.
	secrets []string
}

// minScrubLen is the shortest secret fail scrubs from messages. Shorter
// ones would turn ordinary words into noise. Messages are built so as not
// to contain passwords in the first place; scrubbing is a second line.
const minScrubLen = 4

// fail turns a problem with the string into the *ConfigError ParseConfig
// returns, with the secrets removed from its message. Every error of
// ParseConfig passes through here: what internal/connkeys reports of our
// keys, and what pgx and the scanner report of the rest.
func (p *parseState) fail(e *connkeys.Error) *ConfigError {
	msg := e.Msg
	for _, s := range p.secrets {
		if len(s) >= minScrubLen {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return &ConfigError{Key: e.Key, Msg: msg, Err: e.Err}
}

// pgxError wraps an error from pgx's parser. pgx's message quotes the
// connection string with passwords masked as well as it can; this one leaves
// the connection string out altogether and keeps only pgx's explanation.
func (p *parseState) pgxError(err error) *ConfigError {
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		stripped := *pce
		stripped.ConnString = ""
		return p.fail(&connkeys.Error{Msg: pgxExplanation(&stripped), Err: &stripped})
	}
	// pgx returns nothing else today; say little about what it might.
	return p.fail(&connkeys.Error{Msg: "pgx rejected the connection string", Err: err})
}

// pgxExplanation returns what a *pgconn.ParseConfigError says beyond the
// connection string it quotes: its message and cause. pgconn keeps both
// unexported, so they are what Error() prints after the quoted string,
// whose frame is pgconn's own: the text of an error whose ConnString is
// empty. e.ConnString must be empty.
func pgxExplanation(e *pgconn.ParseConfigError) string {
	frame := (&pgconn.ParseConfigError{}).Error() // "cannot parse ``: "
	return strings.TrimPrefix(e.Error(), frame)
}
