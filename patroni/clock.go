package patroni

import "github.com/pgfailover/pgfailover/internal/clock"

// A Pool runs its Patroni client, source and local-first fallback on its
// own clock. The clock's type is internal to this module, so the
// configurations keep it in an unexported field, which clock.Configure
// sets.
func init() {
	clock.Configure = func(cfg any, c clock.Clock) {
		switch cfg := cfg.(type) {
		case *ClientConfig:
			cfg.clock = c
		case *SourceConfig:
			cfg.clock = c
		case *LocalFirstConfig:
			cfg.clock = c
		default:
			panic("patroni: clock.Configure with a configuration of another type")
		}
	}
}
