package replica

import (
	"strconv"
	"sync"
	"time"
)

// Sampler keeps the newest sample of the primary's WAL position, from the
// probes, from writes made with a CausalToken and from requests made for
// reads, and decides for each read pinned by a write whether a sample
// taken after the write exists or one must be asked for. At most one
// request is in flight: every read that needs a sample meanwhile waits
// for it, so the primary answers one small question per burst of reads
// instead of one per read.
//
// A sample says something of one primary only: when the primary changes,
// what was known of the old one is dropped, and reads pinned by a write
// go to the primary until a sample of the new one exists.
//
// It is safe for concurrent use. Times are passed in; it asks no server
// itself.
type Sampler struct {
	// mu guards every field below. No I/O while held.
	mu      sync.Mutex
	primary string        // the host whose sample last is
	last    Sample        // zero when none
	asking  bool          // a request is in flight
	done    chan struct{} // closed when it is answered
}

// Step is what a read does next to find a sample taken after its write.
type Step uint8

const (
	// Use: the sample returned was taken after the write.
	Use Step = iota
	// Ask: the caller asks the primary for its position now, then calls
	// Answer, whatever the outcome.
	Ask
	// Wait: a request is in flight; wait for the channel returned to
	// close, then call Need again.
	Wait
)

var stepNames = [...]string{Use: "use", Ask: "ask", Wait: "wait"}

func (s Step) String() string {
	if int(s) < len(stepNames) {
		return stepNames[s]
	}
	return "Step(" + strconv.Itoa(int(s)) + ")"
}

// Need returns what a read pinned by a write that completed at wrote does
// to find a sample of the primary at addr taken after it. Ask makes the
// caller the one request in flight; Wait returns the channel closed when
// that request is answered.
func (s *Sampler) Need(addr string, wrote time.Time) (Sample, Step, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if addr != s.primary {
		s.primary, s.last = addr, Sample{}
	}
	if s.last.LSN != 0 && s.last.At.After(wrote) {
		return s.last, Use, nil
	}
	if s.asking {
		return Sample{}, Wait, s.done
	}
	s.asking, s.done = true, make(chan struct{})
	return Sample{}, Ask, nil
}

// Answer ends the request in flight: ok says the primary at addr stood at
// sample.LSN at sample.At (the time just before it was asked). Every read
// waiting for it goes on.
func (s *Sampler) Answer(addr string, sample Sample, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok && (addr == s.primary || s.primary == "") {
		// An answer of a host that is no longer the primary says nothing
		// of the new one's positions.
		s.observeLocked(addr, sample)
	}
	if s.asking {
		s.asking = false
		close(s.done)
	}
}

// Observe records a sample of the primary at addr: one a probe took, or
// one a write with a CausalToken took.
func (s *Sampler) Observe(addr string, sample Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observeLocked(addr, sample)
}

// observeLocked keeps sample when it is the newest of the current
// primary's; a sample of another host is one of a new primary, which
// replaces what was known.
func (s *Sampler) observeLocked(addr string, sample Sample) {
	if sample.LSN == 0 {
		return
	}
	if addr != s.primary {
		s.primary, s.last = addr, sample
		return
	}
	if sample.At.After(s.last.At) {
		s.last = sample
	}
}
