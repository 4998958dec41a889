package control

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
)

// createRecorder is a Backend that reports each Create and refuses it.
type createRecorder struct {
	stopRecorder
	created chan time.Time
}

func (b *createRecorder) Create(context.Context, *backend.Request) (*backend.Sandbox, error) {
	b.created <- time.Now()
	return nil, errors.New("refused by the test")
}

// TestRefillWaitsForColdStart: a pool that a run missed does not make its
// next sandbox while that run's sandbox is made cold (they would share the
// Engine and the CPU): its refill begins refillDelay after the cold start.
func TestRefillWaitsForColdStart(t *testing.T) {
	st, err := store.Open(t.TempDir() + "/ids.db")
	if err != nil {
		t.Fatal(err)
	}
	rt := &createRecorder{created: make(chan time.Time, 4)}
	s := NewService(st, rt, Config{PoolMax: 8})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() { s.cancel(); s.wg.Wait(); _ = st.Close() })

	ps := s.pools
	p := &pool{rt: rt, key: "k", size: 1, misses: map[string]int{}, wake: make(chan struct{})}
	ps.mu.Lock()
	p.lastClaim, p.cold = time.Now(), 1 // what take does on a miss
	ps.fillLocked(p)
	ps.mu.Unlock()

	select {
	case at := <-rt.created:
		t.Fatalf("the pool made a sandbox %v after the miss, while the run's cold start went on", time.Since(at))
	case <-time.After(3 * refillDelay):
	}
	started := time.Now()
	ps.coldStarted(p)
	select {
	case at := <-rt.created:
		if d := at.Sub(started); d < refillDelay {
			t.Fatalf("the refill began %v after the cold start, want at least %v", d, refillDelay)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no refill after the cold start")
	}
}
