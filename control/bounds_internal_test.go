package control

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
)

// stopRecorder is a Backend whose only working calls are Location, SetHooks and
// Stop (recorded): what the paths under test use.
type stopRecorder struct {
	backend.Backend
	mu      sync.Mutex
	stopped []string
}

func (*stopRecorder) Location() engine.Endpoint { return engine.Endpoint{Host: "unix:///fake.sock"} }

func (*stopRecorder) SetHooks(func(string, string, bool, string), func(string, string, time.Duration)) {
}

func (b *stopRecorder) Stop(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = append(b.stopped, id)
	return nil
}

// boundsService is a service over a store in a temporary dir and a sandbox
// record in it, started (its run open).
func boundsService(t *testing.T) (*Service, *stopRecorder, string) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "ids.db"))
	if err != nil {
		t.Fatal(err)
	}
	rt := &stopRecorder{}
	s := NewService(st, rt, Config{})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() { s.cancel(); s.wg.Wait(); _ = st.Close() })
	rec, _, err := st.CreateSandbox(store.Sandbox{Kind: backend.KindUp}, store.Event{})
	if err != nil {
		t.Fatal(err)
	}
	s.events.emit(rec.ID, store.Event{Kind: "sandbox.started"}, "")
	return s, rt, rec.ID
}

func kinds(t *testing.T, s *Service, id string) map[string]int {
	t.Helper()
	evs, err := s.store.Events(id, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, ev := range evs {
		n[ev.Kind]++
	}
	return n
}

// TestEgressDenialsOutOfBounds: the daemon keeps at most maxEgressDestinations
// destinations of a proxy's denials, in memory and in the history, counts the
// others in one overflow event, and drops lines no proxy writes.
func TestEgressDenialsOutOfBounds(t *testing.T) {
	s, _, id := boundsService(t)
	l := s.lives.of(id)
	for _, d := range []backend.EgressDenial{
		{Host: "evil\x1b]0;x\x07.example", Port: 80, Method: "GET"},
		{Host: "a.example", Port: 0, Method: "GET"},
		{Host: "a.example", Port: 70000, Method: "GET"},
		{Host: strings.Repeat("a", 300), Port: 80, Method: "GET"},
		{Host: "a.example", Port: 80, Method: "G\nET"},
		{Host: "spa ce.example", Port: 80, Method: "GET"},
	} {
		s.status.egressDenied(id, l, d)
	}
	if n := kinds(t, s, id)["egress.denied"]; n != 0 {
		t.Fatalf("%d events from lines no proxy writes", n)
	}
	const flood = 5000
	for i := range flood {
		s.status.egressDenied(id, l, backend.EgressDenial{Host: fmt.Sprintf("d%d.example", i), Port: 443, Method: "CONNECT"})
	}
	s.mu.Lock()
	kept := len(l.egress)
	s.mu.Unlock()
	if kept != maxEgressDestinations {
		t.Errorf("%d destinations kept in memory; want %d", kept, maxEgressDestinations)
	}
	if n := kinds(t, s, id)["egress.denied"]; n > maxEgressDestinations+1 {
		t.Errorf("%d egress.denied events while the sandbox runs; want at most %d", n, maxEgressDestinations+1)
	}
	s.status.flushCounts(id, l, true)
	evs, _ := s.store.Events(id, 0)
	denied, overflow := 0, ""
	for _, ev := range evs {
		if ev.Kind == "egress.denied" {
			denied++
			if ev.Extra["overflow"] != "" {
				overflow = ev.Extra["count"]
			}
		}
	}
	if denied > maxEgressDestinations+2 {
		t.Errorf("%d egress.denied events in all; want at most %d", denied, maxEgressDestinations+2)
	}
	if want := fmt.Sprint(flood - maxEgressDestinations); overflow != want {
		t.Errorf("the overflow counts %q denials; want %s", overflow, want)
	}
}

// TestInsideEventsBudget: over its life, a sandbox's sources inside record at
// most maxInsideEvents events (here lowered to 300); the rest are counted in events.dropped.
func TestInsideEventsBudget(t *testing.T) {
	defer func(n int) { insideLimit = n }(insideLimit)
	insideLimit = 300
	s, _, id := boundsService(t)
	l := s.lives.of(id)
	const extra = 50
	line := []byte(`{"time":"2026-01-01T00:00:00Z","kind":"daemon.started","daemon":"x","pid":1}` + "\n")
	for i := range insideLimit + extra {
		s.status.ingestLine(id, line, int64((i+1)*len(line)))
	}
	s.status.flushCounts(id, l, false)
	n := kinds(t, s, id)
	if n["daemon.started"] != insideLimit {
		t.Errorf("%d daemon.started events; want %d", n["daemon.started"], insideLimit)
	}
	evs, _ := s.store.Events(id, 0)
	var last store.Event
	for _, ev := range evs {
		if ev.Kind == "events.dropped" {
			last = ev
		}
	}
	if n["events.dropped"] != 2 || last.Extra["count"] != fmt.Sprint(extra) {
		t.Errorf("%d events.dropped, the last counting %q; want 2, the last counting %d", n["events.dropped"], last.Extra["count"], extra)
	}
	// A daemon that restarted reads the budget back from the history.
	s2 := NewService(s.store, &stopRecorder{}, Config{})
	s2.ctx = s.ctx
	if s2.status.insideBudget(id, s2.lives.of(id)) {
		t.Error("a restarted daemon gives a sandbox past its budget more events")
	}
}

// TestStatusStreamEndsOnlyAnOpenRun: a supervisor.failed line ends the run and
// stops the sandbox; a supervisor.ready after it (or a second one) is dropped.
func TestStatusStreamEndsOnlyAnOpenRun(t *testing.T) {
	s, rt, id := boundsService(t)
	failed := []byte(`{"time":"2026-01-01T00:00:00Z","kind":"supervisor.failed","reason":"forged"}` + "\n")
	ready := []byte(`{"time":"2026-01-01T00:00:00Z","kind":"supervisor.ready"}` + "\n")
	s.status.ingestLine(id, failed, 100)
	s.status.ingestLine(id, ready, 200)
	s.status.ingestLine(id, failed, 300)
	s.wg.Wait()
	rec, _ := s.store.Get(id)
	n := kinds(t, s, id)
	if rec.State != store.StateFailed || n["sandbox.ready"] != 0 || n["sandbox.failed"] != 1 {
		t.Errorf("state %s, %d sandbox.ready, %d sandbox.failed; want failed, 0, 1", rec.State, n["sandbox.ready"], n["sandbox.failed"])
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.stopped) != 1 || rt.stopped[0] != id {
		t.Errorf("stopped %v; want the failed sandbox, once", rt.stopped)
	}
}
