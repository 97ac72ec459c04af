package failover

import (
	"context"
	"sync/atomic"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/internal/hoststate"
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
	pos atomic.Uint64 // a replica.LSN
}

type causalKey struct{}

// WithCausalToken returns a copy of ctx that carries tok: writes made with
// it advance tok, and reads through the Reader made with it see them.
func WithCausalToken(ctx context.Context, tok *CausalToken) context.Context {
	if !causalTokensUsed.Load() {
		causalTokensUsed.Store(true)
	}
	return context.WithValue(ctx, causalKey{}, tok)
}

// causalTokensUsed says that some context has carried a causal token:
// until then no call looks for one.
var causalTokensUsed atomic.Bool

func causalTokenFrom(ctx context.Context) *CausalToken {
	tok, _ := ctx.Value(causalKey{}).(*CausalToken)
	return tok
}

// ParseCausalToken reads a token written by String.
func ParseCausalToken(s string) (*CausalToken, error) {
	tok := new(CausalToken)
	if s == "" {
		return tok, nil
	}
	if s == unknownText {
		tok.advance(unknownPosition)
		return tok, nil
	}
	pos, err := replica.ParseLSN(s)
	if err != nil {
		return nil, err
	}
	tok.advance(pos)
	return tok, nil
}

// unknownText is how String writes a token whose position is unknown.
const unknownText = "primary"

// String returns the token's position as text: a WAL position, "" when it
// holds none, or "primary" when its reads must go to the primary.
func (t *CausalToken) String() string {
	switch pos := replica.LSN(t.pos.Load()); pos {
	case 0:
		return ""
	case unknownPosition:
		return unknownText
	default:
		return pos.String()
	}
}

// advance moves the token's position up to pos; it never moves back.
func (t *CausalToken) advance(pos replica.LSN) {
	for {
		old := t.pos.Load()
		if uint64(pos) <= old || t.pos.CompareAndSwap(old, uint64(pos)) {
			return
		}
	}
}

// recordsWrites reports whether it matters that a call made with ctx
// that succeeded may have written, which only the classifier can say
// (classes). It matters to the Reader's pin_after_write, once the Reader
// has been asked for (takeReader times the writes before that as one),
// and to a causal token in ctx. Otherwise a success is not classified:
// a Pool without a Reader in use pays nothing for one.
//
// It is called on every success, and writes nothing shared but once:
// calledOnce, which takeReader reads after storing readerTaken, so that
// of a success and a first call of Reader at the same moment, one at
// least sees the other.
func (p *Pool) recordsWrites(ctx context.Context) bool {
	if !p.calledOnce.Load() {
		p.calledOnce.Store(true)
	}
	if p.readerTaken.Load() && p.cfg.Replica.PinAfterWrite > 0 {
		return true
	}
	return causalTokensUsed.Load() && causalTokenFrom(ctx) != nil
}

// mayHaveWritten records a write whose outcome is unknown
// (ErrCommitOutcomeUnknown): it may have committed, so the reads that must
// see the Pool's writes count it as one. Reads within pin_after_write are
// pinned by it, and a causal token in ctx, which cannot name its
// position, sends its reads to the primary. Nothing is asked of the host,
// which has just failed.
func (p *Pool) mayHaveWritten(ctx context.Context) {
	if p.readerTaken.Load() {
		p.noteWrite()
	}
	if tok := causalTokenFrom(ctx); tok != nil {
		tok.advance(unknownPosition)
	}
}

// wrote records that a call made with ctx on host h may have written: for
// pin_after_write the Reader's reads must see it (Reader.pin), and a
// causal token in ctx advances to the primary's position. That position,
// read after the write, is also a sample the pinned reads can use.
// Callers ask recordsWrites first (call.recording): it is called only for
// a write that is recorded.
func (p *Pool) wrote(ctx context.Context, h *hostpool.Host) {
	if p.readerTaken.Load() {
		p.noteWrite()
	}
	if tok := causalTokenFrom(ctx); tok != nil {
		since := p.hosts.EpochOf(h)
		s, ok := p.samplePrimary(ctx, h)
		if !ok {
			tok.advance(unknownPosition)
			return
		}
		p.hosts.Observe(h, hoststate.Observation{Kind: hoststate.Sampled, Sample: s, Since: since})
		tok.advance(s.LSN)
	}
}
