package failover

import (
	"context"

	"github.com/pgfailover/pgfailover/failover/internal/engine"
	"github.com/pgfailover/pgfailover/replica"
)

// CausalToken carries the WAL position of the writes made with it, so
// that later reads through the Reader see them without going to the
// primary: a read carrying the token goes to any replica that has replayed
// that position, and to the primary only when none has. It is the opt-in
// alternative to pin_after_write: a token carries its writes to other
// processes and other Pools, and a read with a token asks for exactly the
// position of its own writes, not the primary's at a later moment.
//
// Attach a token to a context with WithCausalToken. A call through the
// Pool that may have written, made with that context, then reads the
// primary's WAL position (one more round trip on the primary) and
// advances the token to it. Pass the token between requests as text
// (String, ParseCausalToken), for example in a cookie. A token whose
// write's position could not be read sends its reads to the primary.
//
// A token is safe for concurrent use. The zero value holds no position.
type CausalToken struct {
	t engine.Token
}

// WithCausalToken returns a copy of ctx that carries tok: writes made with
// it advance tok, and reads through the Reader made with it see them.
func WithCausalToken(ctx context.Context, tok *CausalToken) context.Context {
	if tok == nil {
		return engine.WithToken(ctx, nil) // a nil token, as it was given: no position to see
	}
	return engine.WithToken(ctx, &tok.t)
}

// ParseCausalToken reads a token written by String.
func ParseCausalToken(s string) (*CausalToken, error) {
	tok := new(CausalToken)
	if s == "" {
		return tok, nil
	}
	if s == unknownText {
		tok.t.Advance(engine.UnknownPosition)
		return tok, nil
	}
	pos, err := replica.ParseLSN(s)
	if err != nil {
		return nil, err
	}
	tok.t.Advance(pos)
	return tok, nil
}

// unknownText is how String writes a token whose position is unknown.
const unknownText = "primary"

// String returns the token's position as text: a WAL position, "" when it
// holds none, or "primary" when its reads must go to the primary.
func (t *CausalToken) String() string {
	switch pos := t.t.Position(); pos {
	case 0:
		return ""
	case engine.UnknownPosition:
		return unknownText
	default:
		return pos.String()
	}
}
