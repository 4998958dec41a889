package control

import (
	"github.com/airlock-dev/airlock/control/store"
)

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
// (s.phaseMu held when kind is a phaseKind).
func (s *Service) notePhase(id, kind string) {
	switch kind {
	case "sandbox.started":
		s.phases[id] = true
	case "sandbox.deleted":
		delete(s.phases, id)
	case "sandbox.ready", "sandbox.failed", "sandbox.stopped", "sandbox.deleting":
		s.phases[id] = false
	}
}

// runOpenLocked reports whether the last start of sandbox id has neither got
// ready nor ended (s.phaseMu held); a daemon that restarted reads it once from
// the history.
func (s *Service) runOpenLocked(id string) bool {
	open, ok := s.phases[id]
	if !ok {
		open = s.status.startedNotReady(id)
		s.phases[id] = open
	}
	return open
}

// emitIfOpen records ev, which ends a run, only while the run is open; it
// reports whether it did.
func (s *Service) emitIfOpen(id string, ev store.Event, state string) bool {
	s.phaseMu.Lock()
	defer s.phaseMu.Unlock()
	if !s.runOpenLocked(id) {
		return false
	}
	_, err := s.emitLocked(id, ev, state)
	return err == nil
}

// stopFailed stops the containers of a sandbox whose run failed while they may
// still run (its supervisor reported the failure and exits on its own; a forged
// report leaves it running otherwise), in the background. A daemon that stops
// meanwhile leaves it to recovery, which stops a failed sandbox found running.
func (s *Service) stopFailed(id string) {
	s.goAsync(func() {
		if err := s.rtOf(id).Stop(s.ctx, id); err != nil && s.ctx.Err() == nil {
			s.log.Warn("cannot stop a failed sandbox", "sandbox", id, "error", err.Error())
		}
	})
}
