package control

import (
	"github.com/airlock-dev/airlock/control/store"
)

// Stop stops a sandbox; reason is "" for a user's request. A pending sandbox
// stopped before it was ready ends failed (the store has no pending → stopped).
func (s *Service) Stop(id, reason string) (Sandbox, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return Sandbox{}, err
	}
	if rec.State == store.StateStopped {
		return s.view(rec), nil
	}
	if !liveState(rec.State) && rec.State != store.StatePending {
		return Sandbox{}, notIn(id, rec.State, "")
	}
	if reason == "" {
		reason = "stopped"
	}
	s.goAsync(func() {
		l := s.lives.of(id)
		s.lives.interrupt(l)
		l.mu.Lock()
		defer l.mu.Unlock()
		s.lives.setFlags(l, func() { l.stopping = reason })
		if err := s.rtOf(id).Stop(s.ctx, id); err != nil {
			s.log.Warn("cannot stop", "sandbox", id, "error", err.Error())
		}
		s.status.awaitEgress(l) // the proxy stopped too: its last denials are counted
		s.markStopped(id, reason, nil)
	})
	return s.view(rec), nil
}

// markStopped records sandbox.stopped once, whichever of the stop request and
// the Engine's die event comes first; a sandbox that was never ready fails.
func (s *Service) markStopped(id, reason string, exitCode *int) {
	rec, err := s.store.Get(id)
	if err != nil {
		return
	}
	switch rec.State {
	case store.StateReady, store.StatePaused:
		ev := store.Event{Kind: "sandbox.stopped", Reason: reason, ExitCode: exitCode}
		if s.status.flushCounts(id, s.lives.of(id), false) {
			// A run's egress denials so far are recorded: its summary
			// need not wait for the removal.
			ev.Extra = map[string]string{"egress_counted": "true"}
		}
		s.events.emit(id, ev, store.StateStopped)
	case store.StatePending:
		s.status.flushCounts(id, s.lives.of(id), false)
		s.events.emit(id, store.Event{Kind: "sandbox.failed", Reason: reason + " before it was ready", ExitCode: exitCode,
			Extra: map[string]string{"exit_code": "125"}}, store.StateFailed)
	}
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
