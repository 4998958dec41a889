package pool

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/engine"
)

// fakeBackend is a Backend whose only working call is Location.
type fakeBackend struct{ Backend }

func (fakeBackend) Location() engine.Endpoint { return engine.Endpoint{Host: "unix:///fake.sock"} }

// testPools are pools of a daemon whose context ends with the test.
func testPools(t *testing.T, max int) *Pools {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ps := New(Host{
		Context: func() context.Context { return ctx },
		Log:     func() *slog.Logger { return slog.New(slog.DiscardHandler) },
		Max:     max,
		Claimed: func(string) bool { return false },
	})
	t.Cleanup(func() { cancel(); ps.wg.Wait() })
	return ps
}

// createRecorder is a Backend that reports each Create and refuses it.
type createRecorder struct {
	fakeBackend
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
	rt := &createRecorder{created: make(chan time.Time, 4)}
	ps := testPools(t, 8)
	p := &Pool{rt: rt, key: "k", size: 1, misses: map[string]int{}, wake: make(chan struct{})}
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
	ps.ColdStarted(p)
	select {
	case at := <-rt.created:
		if d := at.Sub(started); d < refillDelay {
			t.Fatalf("the refill began %v after the cold start, want at least %v", d, refillDelay)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no refill after the cold start")
	}
}
