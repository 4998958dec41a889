package pool

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/airlock-dev/airlock/backend"
)

// failingRemove is a Backend whose Remove fails its first fails calls (an
// Engine that is restarting).
type failingRemove struct {
	fakeBackend
	fails int32
	calls atomic.Int32
}

func (b *failingRemove) Remove(context.Context, string) error {
	if b.calls.Add(1) <= b.fails {
		return errors.New("Cannot connect to the Docker daemon")
	}
	return nil
}

// TestPooledRemovalRetried: a parked sandbox removed while the Engine fails
// (one found stopped because the Engine restarts) is removed once the Engine
// answers again; no later daemon would remove it (TestEngineRestartPool).
func TestPooledRemovalRetried(t *testing.T) {
	rt := &failingRemove{fails: 2}
	ps := testPools(t, 0)
	p := &Pool{rt: rt, misses: map[string]int{}, wake: make(chan struct{})}
	m := &Member{sb: &backend.Sandbox{ID: "parked-1"}}
	ps.mu.Lock()
	p.members = append(p.members, m)
	ps.total++
	ps.removeLocked(p, m)
	ps.mu.Unlock()
	ps.removals.Wait()
	if got := rt.calls.Load(); got != 3 {
		t.Fatalf("Remove called %d time(s), want 3 (2 failures, then the removal)", got)
	}
}
