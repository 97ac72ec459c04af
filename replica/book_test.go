package replica

import (
	"maps"
	"testing"
	"time"
)

// TestBook follows a primary and two replicas through probes, a failover
// and a host that leaves, checking each replica's freshness and whether
// the book says it may have changed.
func TestBook(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	b := NewBook(8, 50*time.Millisecond)
	type want map[string]Candidate
	steps := []struct {
		name    string
		do      func() bool
		changed bool
		want    want
	}{
		{"a replica that replayed nothing", func() bool { return b.Replica("r1", Report{At: at(0), Replayed: 0}) }, true, want{}},
		{"the primary's first sample", func() bool { return b.Primary("p", 100, at(0), false) }, true, want{}},
		{"the replica reaches it", func() bool { return b.Replica("r1", Report{At: at(5), Replayed: 100}) }, true,
			want{"r1": {Fresh: at(0), Replayed: 100}}},
		{"the same report again", func() bool { return b.Replica("r1", Report{At: at(5), Replayed: 100}) }, false,
			want{"r1": {Fresh: at(0), Replayed: 100}}},
		{"too soon for a second sample", func() bool { return b.Primary("p", 200, at(10), false) }, true,
			want{"r1": {Fresh: at(0), Replayed: 100}}},
		{"a second sample", func() bool { return b.Primary("p", 200, at(60), false) }, true,
			want{"r1": {Fresh: at(0), Replayed: 100}}},
		{"an idle primary moves its last sample on", func() bool { return b.Primary("p", 200, at(70), false) }, true,
			want{"r1": {Fresh: at(0), Replayed: 100}}},
		{"a read raises the replica", func() bool { return b.Raise("r1", 200) }, true,
			want{"r1": {Fresh: at(70), Replayed: 200}}},
		{"a raise never lowers", func() bool { return b.Raise("r1", 150) }, false,
			want{"r1": {Fresh: at(70), Replayed: 200}}},
		{"a raise of a host not known as a replica", func() bool { return b.Raise("r2", 150) }, false,
			want{"r1": {Fresh: at(70), Replayed: 200}}},
		{"a second replica behind", func() bool { return b.Replica("r2", Report{At: at(80), Replayed: 150}) }, true,
			want{"r1": {Fresh: at(70), Replayed: 200}, "r2": {Fresh: at(0), Replayed: 150}}},
		{"its probe fails", func() bool { return b.Unknown("r2") }, true,
			want{"r1": {Fresh: at(70), Replayed: 200}}},
		{"and fails again", func() bool { return b.Unknown("r2") }, false,
			want{"r1": {Fresh: at(70), Replayed: 200}}},
		{"another primary: the history starts again", func() bool { return b.Primary("r2", 300, at(100), false) }, true,
			want{"r1": {Replayed: 200}}},
		{"the replica catches up with it", func() bool { return b.Replica("r1", Report{At: at(110), Replayed: 300}) }, true,
			want{"r1": {Fresh: at(100), Replayed: 300}}},
		{"the primary leaves", func() bool { return b.Forget("r2") }, true,
			want{"r1": {Replayed: 300}}},
		{"the replica leaves", func() bool { return b.Forget("r1") }, true, want{}},
	}
	for _, s := range steps {
		if got := s.do(); got != s.changed {
			t.Errorf("%s: changed = %v, want %v", s.name, got, s.changed)
		}
		if got := b.Candidates(); !maps.Equal(got, map[string]Candidate(s.want)) {
			t.Errorf("%s: candidates %v, want %v", s.name, got, s.want)
		}
	}
}
