package control

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
)

// What code inside a sandbox can make the daemon record is bounded
// (docs/security.md, "Against code inside a sandbox"). Its sources:
//
//   - the supervisor's status stream (status.go), which any process inside can
//     write: lines of at most 64 KiB, 16 MiB a run, a burst of 2000 lines then
//     100 a second, or the sandbox fails; supervisor.ready and supervisor.failed
//     only end an open run (phase.go), so at most one of them a start counts;
//   - the egress proxy's denials (egress.go), which any process inside causes:
//     at most maxEgressDestinations destinations recorded one by one (their
//     first denials at most egressRate a second after a burst of egressBurst;
//     the others' first denials are recorded with their count when the sandbox
//     stops or is removed), every further destination counted in one overflow
//     event;
//   - over a sandbox's whole life, at most maxInsideEvents events of both
//     sources together: later ones are dropped and counted, in one
//     events.dropped event when it begins and its count when the sandbox stops
//     or is removed.
//
// The rest of a sandbox's history comes from the host: the user's requests
// (create, stop, exec, removal) and the runtime's work, one event or a few a
// start (services' first results: one a service).
const maxInsideEvents = 10000

// insideLimit is maxInsideEvents, lowered by tests (the budget's own test
// would otherwise write ten thousand events).
var insideLimit = maxInsideEvents

// egressDrain bounds how long a stop or a removal waits for the egress follower
// to read what the stopped proxy printed, before the counts are recorded.
const egressDrain = 5 * time.Second

// insideBounds is what a sandbox's sources inside recorded (guarded by
// Service.mu).
type insideBounds struct {
	known    bool     // recorded and dropped were read from the history
	recorded int      // events from inside recorded over the sandbox's life
	dropped  overflow // events from inside dropped past maxInsideEvents

	egressOverflow overflow      // denials to destinations past maxEgressDestinations
	egressLimiter  *rate.Limiter // bounds how fast first denials are recorded
	egressDone     chan struct{} // closed when the egress follower ended
}

// overflow counts what went past a bound, recorded in one event when the
// first one does and with its count when the sandbox stops or is removed.
type overflow struct {
	n        int // past the bound
	recorded int // the count the last event holds
}

// add counts one more past the bound, and reports whether it is the first:
// its event, with a count of 1, is then the caller's to record.
func (o *overflow) add() (first bool) {
	o.n++
	if o.recorded != 0 {
		return false
	}
	o.recorded = 1
	return true
}

// unrecorded returns the count when it grew since its last event (whose
// count it becomes), or 0.
func (o *overflow) unrecorded() int {
	if o.n <= o.recorded {
		return 0
	}
	o.recorded = o.n
	return o.n
}

// emitInside records ev, which a source inside sandbox id caused, within the
// sandbox's budget of maxInsideEvents; it reports whether it did.
func (f *follower) emitInside(id string, l *live, ev store.Event) bool {
	if !f.insideBudget(id, l) {
		return false
	}
	_, err := f.emit(id, ev, "")
	return err == nil
}

// insideBudget takes one event from sandbox id's budget; past it, it counts the
// event as dropped (the first drop is recorded as an events.dropped event).
func (f *follower) insideBudget(id string, l *live) bool {
	f.mu.Lock()
	known := l.bounds.known
	f.mu.Unlock()
	if !known {
		n, dropped := f.countInside(id)
		f.mu.Lock()
		if !l.bounds.known {
			l.bounds.known, l.bounds.recorded = true, n
			l.bounds.dropped = overflow{n: dropped, recorded: dropped}
		}
		f.mu.Unlock()
	}
	f.mu.Lock()
	if l.bounds.recorded < insideLimit {
		l.bounds.recorded++
		f.mu.Unlock()
		return true
	}
	first := l.bounds.dropped.add()
	f.mu.Unlock()
	if first {
		f.log().Warn("a sandbox reached its budget of events from inside; dropping further ones", "sandbox", id, "limit", insideLimit)
		f.emit(id, droppedEvent(1), "")
	}
	return false
}

func droppedEvent(n int) store.Event {
	return store.Event{Kind: "events.dropped",
		Reason: fmt.Sprintf("more than %d events came from inside the sandbox; later ones are dropped (%d so far)", insideLimit, n),
		Extra:  map[string]string{"limit": strconv.Itoa(insideLimit), "count": strconv.Itoa(n)}}
}

// countInside reads from sandbox id's history how many events its sources
// inside recorded, and how many the last events.dropped event counts.
func (f *follower) countInside(id string) (recorded, dropped int) {
	evs, err := f.store.Events(id, 0)
	if err != nil {
		return 0, 0
	}
	for _, ev := range evs {
		switch {
		case ev.Kind == "events.dropped":
			n, _ := strconv.Atoi(ev.Extra["count"])
			dropped = max(dropped, n)
		case ev.Kind == "egress.denied", ev.StatusOffset > 0 && !phaseKind(ev.Kind):
			recorded++
		}
	}
	return recorded, dropped
}

// flushCounts records the counts kept in memory since they were last recorded:
// denials of each destination and past the cap (egress.go), events dropped past
// the budget. It runs when the sandbox stops and when it is removed; a sandbox
// removed once its primary exits records them once, at its removal, unless its
// backend can say when it has passed every denial so far (EgressSyncer): then
// its egress counts are recorded as it stops too (its run's summary need not
// wait for the removal), and at the removal what came after.
// counted reports whether the egress counts were recorded at a stop so.
func (f *follower) flushCounts(id string, l *live, removal bool) (counted bool) {
	f.mu.Lock()
	later := !removal && l.removeOnExit
	following := l.bounds.egressDone != nil
	f.mu.Unlock()
	if later {
		if s, ok := f.rtOf(id).(backend.EgressSyncer); ok && following {
			ctx, cancel := context.WithTimeout(f.ctx(), egressDrain)
			err := s.SyncEgress(ctx, id)
			cancel()
			if err == nil {
				f.flushEgress(id, l)
				return true
			}
		}
		return false
	}
	f.flushEgress(id, l)
	f.mu.Lock()
	n := l.bounds.dropped.unrecorded()
	f.mu.Unlock()
	if n > 0 {
		f.emit(id, droppedEvent(n), "")
	}
	return false
}

// awaitEgress waits, up to egressDrain, until the egress follower of l read
// everything its proxy printed: call it once the proxy stopped.
func (f *follower) awaitEgress(l *live) {
	f.mu.Lock()
	done := l.bounds.egressDone
	f.mu.Unlock()
	if done == nil {
		return
	}
	t := time.NewTimer(egressDrain)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-f.ctx().Done():
	}
}
