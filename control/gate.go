package control

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
)

// DefaultCreatesPerEngine is how many sandboxes the daemon makes or starts on
// one Engine at once unless Config.CreatesPerEngine says otherwise.
const DefaultCreatesPerEngine = 8

// queuedAfter is how long a sandbox waits for its turn before it is said to
// be queued (sandbox.queued).
const queuedAfter = time.Second

// engineGate lets at most n makes or starts reach one Engine at once, the
// others waiting in the order they came: under a burst the Engine's
// create+start serialise on its own locks, so more at once only adds to
// everyone's wait (and its timeouts).
type engineGate struct {
	mu      sync.Mutex
	n       int
	running int
	waiting []chan struct{}
}

// gates are the daemon's engineGates, one per backend.
type gates struct {
	mu sync.Mutex
	m  map[backend.Backend]*engineGate
}

// enter waits for sandbox id's turn on its Engine, and returns what ends it.
// A turn that does not come within queuedAfter is recorded (sandbox.queued,
// with how many are ahead), so that the client can say so.
func (s *Service) enter(ctx context.Context, id string) (leave func(), err error) {
	rt, _ := baseOf(s.rtOf(id), id)
	s.gates.mu.Lock()
	if s.gates.m == nil {
		s.gates.m = map[backend.Backend]*engineGate{}
	}
	g := s.gates.m[rt]
	if g == nil {
		n := s.cfg.CreatesPerEngine
		if n <= 0 {
			n = DefaultCreatesPerEngine
		}
		g = &engineGate{n: n}
		s.gates.m[rt] = g
	}
	s.gates.mu.Unlock()

	g.mu.Lock()
	if g.running < g.n && len(g.waiting) == 0 {
		g.running++
		g.mu.Unlock()
		return g.leave, nil
	}
	turn := make(chan struct{})
	g.waiting = append(g.waiting, turn)
	ahead := len(g.waiting) - 1
	g.mu.Unlock()
	t := time.NewTimer(queuedAfter)
	defer t.Stop()
	for {
		select {
		case <-turn:
			return g.leave, nil
		case <-t.C:
			s.events.emit(id, store.Event{Kind: "sandbox.queued", Reason: fmt.Sprintf(
				"waiting for the Engine: %d sandboxes are being made or started on it (runtime.creates_per_engine), %d more queued before this one", g.n, ahead)}, "")
		case <-ctx.Done():
			g.mu.Lock()
			for i, w := range g.waiting {
				if w == turn {
					g.waiting = append(g.waiting[:i], g.waiting[i+1:]...)
					g.mu.Unlock()
					return nil, ctx.Err()
				}
			}
			g.mu.Unlock()
			<-turn // given meanwhile: pass it on
			g.leave()
			return nil, ctx.Err()
		}
	}
}

// leave ends a turn: the first waiting gets it.
func (g *engineGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) > 0 {
		next := g.waiting[0]
		g.waiting = g.waiting[1:]
		close(next) // the turn passes on: running stays
		return
	}
	g.running--
}
