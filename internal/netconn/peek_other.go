//go:build !linux

package netconn

// peekFD is the fallback for systems where a non-blocking peek is not wired
// up: it reports nothing, so callers behave as if peeking were unsupported.
func (p *Peeker) peekFD(uintptr) {
	p.res = PeekUnsupported
}
