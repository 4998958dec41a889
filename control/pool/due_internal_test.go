package pool

import (
	"testing"
	"time"
)

// TestDueNoSoonerThanAColdStart (control.TestPoolCreateWaitsForOneBeingMade,
// red in CI): a create that came to an empty pool later after the refill
// began than twice the last make's time (its request took that long on a busy
// host) did not wait at all, and started cold, though the one being made was
// still due sooner than a cold start begun then would be. It waits at least as
// long as a cold start would take; with none being made, not at all.
func TestDueNoSoonerThanAColdStart(t *testing.T) {
	now := time.Now()
	p := &Pool{makeTook: 100 * time.Millisecond, makeStarts: []time.Time{now.Add(-300 * time.Millisecond)}}
	if due := p.dueLocked(now); due.Before(now.Add(p.makeTook)) {
		t.Errorf("begun 300 ms ago, a make takes 100 ms: due %v from now, want at least 100 ms", due.Sub(now))
	}
	p.makeStarts = []time.Time{now.Add(-10 * time.Millisecond)}
	if due := p.dueLocked(now); !due.Equal(now.Add(190 * time.Millisecond)) {
		t.Errorf("begun 10 ms ago: due %v from now, want 190 ms (twice its time from its begin)", due.Sub(now))
	}
	p.makeStarts = nil
	if due := p.dueLocked(now); !due.IsZero() {
		t.Errorf("none being made: due %v, want none", due)
	}
}
