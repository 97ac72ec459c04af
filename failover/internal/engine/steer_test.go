package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pgfailover/pgfailover/hosthealth"
	"github.com/pgfailover/pgfailover/replica"
)

// fallbackSteer steers to local until it is told local failed, then to
// fallback: a local-first steerer whose cooldown ran out while the local
// server stayed down.
type fallbackSteer struct {
	NoSteer
	local, fallback string

	mu     sync.Mutex
	failed []string
}

func (s *fallbackSteer) Choose(context.Context) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.failed {
		if a == s.local {
			return s.fallback
		}
	}
	return s.local
}

func (s *fallbackSteer) Failed(addr string, _ error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = append(s.failed, addr)
}

// TestSteeredToADownHost: a call the steerer sends to a host that host
// state counts down tells the steerer, and goes where it then chooses,
// not down the ranking.
func TestSteeredToADownHost(t *testing.T) {
	e, _ := outageEngine(t, replica.Policy{PinAfterWrite: time.Second})
	steer := &fallbackSteer{local: "r1:5432", fallback: "r2:5432"}
	e.Steer = steer
	memFail(e, "r1:5432", hosthealth.Transport)
	c := &call{e: e, ctx: context.Background(), picker: picker{target: hosthealth.TargetAny}}
	if got := nextAddr(c); got != "r2:5432" {
		t.Fatalf("steered to a down local server: the call went to %q, want the steerer's fallback r2:5432", got)
	}
	if len(steer.failed) != 1 || steer.failed[0] != "r1:5432" {
		t.Fatalf("the steerer was told of %v, want r1:5432 once", steer.failed)
	}

	// A usable choice is taken as it is, and nothing is told.
	memAnswer(e, "r1:5432", hosthealth.RoleReplica)
	steer.failed = nil
	if got := nextAddr(c); got != "r1:5432" {
		t.Fatalf("the call went to %q, want the steerer's usable choice r1:5432", got)
	}
	if len(steer.failed) != 0 {
		t.Fatalf("the steerer was told of %v for a usable host", steer.failed)
	}
}

// nextAddr is the address of the host c's picker takes now, "" for none.
func nextAddr(c *call) string {
	if h, _ := c.picker.next(c.e.State.Routes(), c); h != nil {
		return h.Addr
	}
	return ""
}
