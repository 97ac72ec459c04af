package engine

import (
	"context"
	"math"
	"sync/atomic"

	"github.com/pgfailover/pgfailover/failover/internal/hostpool"
	"github.com/pgfailover/pgfailover/internal/hoststate"
	"github.com/pgfailover/pgfailover/replica"
)

// Token is the position a causal token carries (failover.CausalToken):
// the WAL position of the writes made with it, which the Reader's reads
// made with it must see. The zero value holds no position.
type Token struct {
	pos atomic.Uint64 // a replica.LSN
}

// UnknownPosition is the position of a causal token whose write's
// position could not be read: reads carrying it go to the primary.
const UnknownPosition = replica.LSN(math.MaxUint64)

// Position returns the token's position.
func (t *Token) Position() replica.LSN { return replica.LSN(t.pos.Load()) }

// Advance moves the token's position up to pos; it never moves back.
func (t *Token) Advance(pos replica.LSN) {
	for {
		old := t.pos.Load()
		if uint64(pos) <= old || t.pos.CompareAndSwap(old, uint64(pos)) {
			return
		}
	}
}

type tokenKey struct{}

// WithToken returns a copy of ctx that carries tok: writes made with it
// advance tok, and reads through the Reader made with it see them.
func WithToken(ctx context.Context, tok *Token) context.Context {
	if !tokensUsed.Load() {
		tokensUsed.Store(true)
	}
	return context.WithValue(ctx, tokenKey{}, tok)
}

// tokensUsed says that some context has carried a causal token: until
// then no call looks for one.
var tokensUsed atomic.Bool

func tokenFrom(ctx context.Context) *Token {
	tok, _ := ctx.Value(tokenKey{}).(*Token)
	return tok
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
func (e *Engine) recordsWrites(ctx context.Context) bool {
	if !e.calledOnce.Load() {
		e.calledOnce.Store(true)
	}
	if e.readerTaken.Load() && e.Replica.PinAfterWrite > 0 {
		return true
	}
	return tokensUsed.Load() && tokenFrom(ctx) != nil
}

// mayHaveWritten records a write whose outcome is unknown
// (ErrCommitOutcomeUnknown): it may have committed, so the reads that must
// see the Pool's writes count it as one. Reads within pin_after_write are
// pinned by it, and a causal token in ctx, which cannot name its
// position, sends its reads to the primary. Nothing is asked of the host,
// which has just failed.
func (e *Engine) mayHaveWritten(ctx context.Context) {
	if e.readerTaken.Load() {
		e.noteWrite()
	}
	if tok := tokenFrom(ctx); tok != nil {
		tok.Advance(UnknownPosition)
	}
}

// wrote records that a call made with ctx on host h may have written: for
// pin_after_write the Reader's reads must see it (Reader.pin), and a
// causal token in ctx advances to the primary's position. That position,
// read after the write, is also a sample the pinned reads can use.
// Callers ask recordsWrites first (call.recording): it is called only for
// a write that is recorded.
func (e *Engine) wrote(ctx context.Context, h *hostpool.Host) {
	if e.readerTaken.Load() {
		e.noteWrite()
	}
	if tok := tokenFrom(ctx); tok != nil {
		since := e.Hosts.EpochOf(h)
		s, ok := e.samplePrimary(ctx, h)
		if !ok {
			tok.Advance(UnknownPosition)
			return
		}
		e.Hosts.Observe(h, hoststate.Observation{Kind: hoststate.Sampled, Sample: s, Since: since})
		tok.Advance(s.LSN)
	}
}

// noteWrite records that a call that may have written succeeded. The
// clock is read once. The time is kept exactly, never moving back, so
// that a sample of the primary taken after it is known to be (see
// Reader.pin); a writer that finds a later time already there writes
// nothing.
func (e *Engine) noteWrite() {
	now := e.Clock.Now().UnixNano()
	for {
		old := e.lastWrite.Load()
		if now <= old || e.lastWrite.CompareAndSwap(old, now) {
			return
		}
	}
}
