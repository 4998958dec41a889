package control

import (
	"log/slog"
	"sync"

	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/secrets"
)

// events appends the daemon's events to the store: reasons redacted, each
// logged, and the phase of a sandbox's run it marks noted (below). It sees of
// the daemon only its store, redactor and log, and the follower's reading of
// a sandbox's history (startedNotReady).
type events struct {
	store           *store.Store
	redactor        *secrets.Redactor
	log             func() *slog.Logger
	startedNotReady func(id string) bool
	// observe, when set, is told of every event recorded (metrics.go).
	observe func(store.Event)

	// mu serialises the events that open or end a sandbox's run, so that a
	// check of the phase and the event it allows are one step.
	mu     sync.Mutex
	phases map[string]bool // sandbox ID → its last start is open (guarded by mu)
}

// One state machine decides (docs/daemon.md "States and events"). A start of a
// sandbox opens a run (sandbox.started); the run ends with the first of
// sandbox.ready, sandbox.failed or sandbox.stopped (or a removal). The
// supervisor's status stream, which any process in the sandbox can write, may
// only end a run that is open: a supervisor.ready or supervisor.failed line read
// once the run ended (a forged failure before the real ready line, a second
// ready, a failure written after the sandbox got ready) is dropped, so a sandbox
// reported failed never becomes ready behind the user's back. A failure the
// stream reports stops the sandbox: what airlock reported failed is not left
// running.

// phaseKind reports whether events of kind open or end a run.
func phaseKind(kind string) bool {
	switch kind {
	case "sandbox.started", "sandbox.ready", "sandbox.failed", "sandbox.stopped", "sandbox.deleting", "sandbox.deleted":
		return true
	}
	return false
}

// notePhase keeps what a recorded event of kind means for the run of sandbox id
// (e.mu held when kind is a phaseKind).
func (e *events) notePhase(id, kind string) {
	switch kind {
	case "sandbox.started":
		e.phases[id] = true
	case "sandbox.deleted":
		delete(e.phases, id)
	case "sandbox.ready", "sandbox.failed", "sandbox.stopped", "sandbox.deleting":
		e.phases[id] = false
	}
}

// runOpenLocked reports whether the last start of sandbox id has neither got
// ready nor ended (e.mu held); a daemon that restarted reads it once from
// the history.
func (e *events) runOpenLocked(id string) bool {
	open, ok := e.phases[id]
	if !ok {
		open = e.startedNotReady(id)
		e.phases[id] = open
	}
	return open
}

// emitIfOpen records ev, which ends a run, only while the run is open; it
// reports whether it did.
func (e *events) emitIfOpen(id string, ev store.Event, state string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.runOpenLocked(id) {
		return false
	}
	_, err := e.emitLocked(id, ev, state)
	return err == nil
}

// emit appends an event, logging a failure (the sandbox may have been purged).
func (e *events) emit(id string, ev store.Event, state string) (store.Event, error) {
	if phaseKind(ev.Kind) {
		e.mu.Lock()
		defer e.mu.Unlock()
	}
	return e.emitLocked(id, ev, state)
}

// emitWith is emit that also changes the sandbox's record with change in the
// same write (store.AppendWith).
func (e *events) emitWith(id string, ev store.Event, state string, change func(*store.Sandbox) error) (store.Event, error) {
	if phaseKind(ev.Kind) {
		e.mu.Lock()
		defer e.mu.Unlock()
	}
	return e.emitLockedWith(id, ev, state, change)
}

// emitLocked is emit with e.mu held for an event of a phaseKind.
func (e *events) emitLocked(id string, ev store.Event, state string) (store.Event, error) {
	return e.emitLockedWith(id, ev, state, nil)
}

// emitLockedWith is emitWith with e.mu held for an event of a phaseKind.
func (e *events) emitLockedWith(id string, ev store.Event, state string, change func(*store.Sandbox) error) (store.Event, error) {
	ev.Reason = string(e.redactor.Redact([]byte(ev.Reason)))
	ev, err := e.store.AppendWith(id, ev, state, change)
	if err != nil {
		e.log().Warn("cannot record event", "sandbox", id, "kind", ev.Kind, "error", err.Error())
		return ev, err
	}
	e.recorded(ev)
	return ev, nil
}

// recorded logs an event the store appended and notes the phase it marks.
func (e *events) recorded(ev store.Event) {
	e.log().Info("event", "sandbox", ev.SandboxID, "sequence", ev.Sequence, "kind", ev.Kind, "state", ev.State, "reason", ev.Reason)
	e.notePhase(ev.SandboxID, ev.Kind)
	if e.observe != nil {
		e.observe(ev)
	}
}
