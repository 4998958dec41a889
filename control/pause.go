package control

import (
	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
)

// A ready sandbox can be paused: every process of it — its supervisor, the
// daemons, the execs running in it, its services' containers — frozen in
// place by the backend (backend.Pauser; on Docker the Engine's container
// pause, the cgroup freezer), its memory kept; unpaused, each goes on where it
// was. The record is then paused (sandbox.paused) and ready again
// (sandbox.unpaused). While paused:
//
//   - its deadline and its idle clock still run (lifetime.go, reap.go): a
//     paused sandbox expires, is stopped by runtime.idle_ttl, or reaped with
//     its CLI, as a ready one is; pausing is a use (the idle clock starts
//     again), being paused is not;
//   - an exec or an attach is refused (409, pausedError); its files can be
//     read (the Engine reads a frozen container's filesystem), not written;
//   - stop and delete work: the backend thaws it first, so that its
//     supervisor shuts the daemons down as usual;
//   - the status follower's exec is frozen with the rest and goes on after;
//     the freeze is no end of anything.

// Pause freezes ready sandbox id and records sandbox.paused (reason "" for a
// request, idle_timeout for an idle sandbox whose on_idle is pause). A paused
// one is left as it is; a backend that cannot is ErrNotSupported.
func (s *Service) Pause(id, reason string) (Sandbox, error) {
	return s.freeze(id, true, reason)
}

// Unpause thaws paused sandbox id and records sandbox.unpaused: it is ready
// again. A ready one is left as it is.
func (s *Service) Unpause(id string) (Sandbox, error) {
	return s.freeze(id, false, "")
}

// freeze pauses (pause) or unpauses sandbox id, under its lifecycle lock.
func (s *Service) freeze(id string, pause bool, reason string) (Sandbox, error) {
	verb, from, to, kind := "unpause", store.StatePaused, store.StateReady, "sandbox.unpaused"
	if pause {
		verb, from, to, kind = "pause", store.StateReady, store.StatePaused, "sandbox.paused"
	}
	rec, err := s.store.Get(id)
	if err != nil {
		return Sandbox{}, err
	}
	p, ok := s.rtOf(id).(backend.Pauser)
	if !ok {
		return Sandbox{}, errorf(backend.ErrNotSupported, "cannot %s sandbox %s: its backend (%s) cannot freeze a sandbox; pausing needs a Docker Engine", verb, id, s.endpointOf(rec).String())
	}
	l := s.lives.of(id)
	l.mu.Lock()
	defer l.mu.Unlock()
	if rec, err = s.store.Get(id); err != nil {
		return Sandbox{}, err
	}
	switch rec.State {
	case to:
		return s.view(rec), nil
	case from:
	default:
		return Sandbox{}, errorf(store.ErrInvalidState, "cannot %s sandbox %s: it is %s; only a %s sandbox can be %sd", verb, id, rec.State, from, verb)
	}
	// A request is a use of the sandbox: its idle clock starts again.
	s.lives.touch(id)
	if pause {
		err = p.Pause(s.ctx, id)
	} else {
		err = p.Unpause(s.ctx, id)
	}
	if err != nil {
		return Sandbox{}, err
	}
	ev, err := s.events.emit(id, store.Event{Kind: kind, Reason: reason}, to)
	if err != nil {
		if pause {
			// Its state moved meanwhile (its primary ended): not left frozen.
			_ = p.Unpause(s.ctx, id)
		}
		return Sandbox{}, err
	}
	if cur, err := s.store.Get(id); err == nil {
		rec = cur
	} else {
		rec.State, rec.LastSeq = ev.State, ev.Sequence
	}
	if !pause {
		s.followAfterThaw(id, l)
	}
	return s.view(rec), nil
}

// followAfterThaw follows the status stream of a sandbox this daemon found
// paused when it started (recovery follows no frozen sandbox: no exec can
// start in it), now that it runs again. l.mu held.
func (s *Service) followAfterThaw(id string, l *live) {
	l.ingestMu.Lock()
	following := l.tailGen > 0
	l.ingestMu.Unlock()
	if !following {
		s.status.startTailAt(id, l, s.status.recordedOffset(id))
	}
}

// pausedError is the refusal of what a paused sandbox cannot do (an exec, an
// attach, a file written), or nil when rec is not paused.
func pausedError(rec store.Sandbox, what string) error {
	if rec.State != store.StatePaused {
		return nil
	}
	return errorf(store.ErrInvalidState, "cannot %s sandbox %s: it is paused; unpause it first (POST /v1/sandboxes/%s/unpause, airlock unpause %s)", what, rec.ID, rec.ID, rec.ID)
}

// liveState reports whether state is one in which the sandbox's processes
// exist and are not going away: ready or paused.
func liveState(state string) bool {
	return state == store.StateReady || state == store.StatePaused
}

// recoverPaused reconciles, when the daemon starts, a ready or paused record
// with its primary found paused, or a paused one with its primary found
// running (engineState, the Engine's word), and reports whether it did: the
// record says what the Engine holds. A frozen sandbox's stream is followed
// once it is unpaused (no exec starts in it before).
func (rc *recovery) recoverPaused(rec store.Sandbox, engineState string) bool {
	switch {
	case engineState == "paused" && rec.State == store.StateReady:
		// Its daemon went between the freeze and its record.
		rc.emit(rec.ID, store.Event{Kind: "sandbox.paused", Reason: "found paused"}, store.StatePaused)
		return true
	case engineState == "paused" && rec.State == store.StatePaused:
		return true
	case engineState == "running" && rec.State == store.StatePaused:
		// Thawed while no daemon ran (or its daemon went between the thaw
		// and its record): ready, and followed as a ready one is.
		rc.emit(rec.ID, store.Event{Kind: "sandbox.unpaused", Reason: "found running"}, store.StateReady)
		l := rc.liveOf(rec.ID)
		l.mu.Lock()
		rc.status.startTailAt(rec.ID, l, rc.status.recordedOffset(rec.ID))
		l.mu.Unlock()
		return true
	}
	return false
}

// expirePause is the on_idle policy that pauses a sandbox idle for its idle
// timeout, rather than deleting or stopping it (lifetime.go): it stays paused
// until unpaused, which starts its idle clock again.
const expirePause = "pause"

// checkIdlePolicy checks an on_idle value: delete, stop or pause.
func checkIdlePolicy(p string) error {
	if p != "" && p != expireDelete && p != expireStop && p != expirePause {
		return errorf(ErrInvalidRequest, "on_idle: must be %q, %q or %q, not %q", expireDelete, expireStop, expirePause, p)
	}
	return nil
}

// canPause is ErrNotSupported when rt cannot pause sandbox id (on_idle
// "pause" is refused there rather than failing when it is idle).
func (s *Service) canPause(rt backend.Backend, id string) error {
	if _, ok := rt.(backend.Pauser); !ok {
		return errorf(backend.ErrNotSupported, "on_idle: sandbox %s cannot be paused on its backend (%s); use delete or stop", id, rt.Location().String())
	}
	return nil
}

// canPauseOn is canPause for a new sandbox on ep (nil: the daemon's own).
func (s *Service) canPauseOn(ep *engine.Endpoint, id string) error {
	rt := s.rt
	if ep != nil && !ep.IsZero() {
		rt = s.runtimeFor(*ep)
	}
	if id == "" {
		id = "(new)"
	}
	return s.canPause(rt, id)
}
