package clock

import "time"

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer, like *time.Timer.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// Configure sets c as the clock of cfg, a pointer to a configuration of a
// public package of this module whose clock field cannot be exported (its
// type is this one). Package patroni sets it when it is initialized, for
// its ClientConfig, SourceConfig and LocalFirstConfig; a Pool calls it to
// run them on its own clock. It is nil until then.
var Configure func(cfg any, c Clock)
