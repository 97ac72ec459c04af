package replica

import "time"

// Sample is the primary's WAL position at a moment: every write the
// primary acknowledged before At lies at or before LSN.
type Sample struct {
	LSN LSN
	At  time.Time
}

// History keeps the primary's most recent samples, oldest first. It is
// not safe for concurrent use; the caller guards it.
type History struct {
	samples []Sample // a ring of at most cap(samples) entries
	first   int      // index of the oldest sample once the ring is full
}

// NewHistory returns a History that keeps the last n samples (at least 2).
func NewHistory(n int) *History {
	return &History{samples: make([]Sample, 0, max(n, 2))}
}

// Add records a sample. Samples arrive in time order. A sample at the
// position of the last one only moves that one's time on: an idle primary
// fills no history. A position lower than the last one means another
// primary (a failover, a new timeline): what was known of the old one no
// longer says anything, so the history starts again.
func (h *History) Add(s Sample) {
	if last, ok := h.Last(); ok {
		switch {
		case s.LSN == last.LSN:
			h.samples[(h.first+len(h.samples)-1)%len(h.samples)].At = s.At
			return
		case s.LSN < last.LSN:
			h.Reset()
		}
	}
	if len(h.samples) < cap(h.samples) {
		h.samples = append(h.samples, s)
		return
	}
	h.samples[h.first] = s
	h.first = (h.first + 1) % len(h.samples)
}

// Reset forgets every sample.
func (h *History) Reset() {
	h.samples = h.samples[:0]
	h.first = 0
}

// Len returns the number of samples kept.
func (h *History) Len() int { return len(h.samples) }

func (h *History) at(i int) Sample { return h.samples[(h.first+i)%len(h.samples)] }

// Last returns the newest sample, if any.
func (h *History) Last() (Sample, bool) {
	if len(h.samples) == 0 {
		return Sample{}, false
	}
	return h.at(len(h.samples) - 1), true
}

// Reached returns the time of the newest sample whose position replayed
// has reached: a replica that has replayed up to replayed holds every
// write acknowledged before that time. ok is false when no sample is that
// old, or replayed is unknown (zero).
func (h *History) Reached(replayed LSN) (at time.Time, ok bool) {
	if replayed == 0 {
		return time.Time{}, false
	}
	for i := len(h.samples) - 1; i >= 0; i-- {
		if s := h.at(i); s.LSN <= replayed {
			return s.At, true
		}
	}
	return time.Time{}, false
}
