package control

import (
	"context"
	"maps"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/manifest"
)

// startLocked starts the sandbox; l.mu is held.
func (s *Service) startLocked(ctx context.Context, id string, l *live) {
	s.metrics.starting(id)
	if l.handle == nil {
		h, err := s.rtOf(id).Open(ctx, id, l.resolved)
		if err != nil {
			s.events.emit(id, store.Event{Kind: "sandbox.failed", Reason: err.Error()}, store.StateFailed)
			return
		}
		l.handle = h
	}
	// A new life: what the last one's main command ended with is no longer news.
	s.lives.setFlags(l, func() { l.stopping, l.oom, l.mainExit, l.mainEnded = "", false, nil, time.Time{} })
	// The status stream is ingested only once sandbox.started is recorded, so the
	// supervisor's daemon.* events never come before it; the runtime empties the
	// stream before every start, so the previous run's lines are never read again.
	l.ingestMu.Lock()
	l.tailGen++ // a follower of the previous run stops
	l.offset, l.offsetOK, l.starting, l.complete = 0, true, true, false
	l.ingestMu.Unlock()
	s.lives.setFlags(l, func() { l.up = map[string]bool{} })
	var err error
	// unpark: a parked sandbox's record says so no longer once its claim was
	// delivered, written with its sandbox.started (one write, not two).
	var unpark func(*store.Sandbox) error
	if c := l.claim; c != nil {
		// A parked sandbox: started already; its claim starts the run.
		l.claim = nil
		if err = s.rtOf(id).Claim(ctx, l.handle, *c); err == nil {
			unpark = func(r *store.Sandbox) error { r.Parked = false; return nil }
		}
	} else {
		var leave func()
		if leave, err = s.enter(ctx, id); err == nil {
			err = s.rtOf(id).Start(ctx, l.handle)
			leave()
		}
	}
	l.ingestMu.Lock()
	l.starting = false
	final := l.finalData
	l.finalData = nil
	if err != nil {
		if final != nil {
			s.status.finalLocked(id, l, nil) // a waiting catch-up goes on
		}
		l.ingestMu.Unlock()
		reason, extra := err.Error(), exitExtra(err)
		if code, out, ok := s.status.containerEnd(id, l.handle.PrimaryID); ok {
			// The container died while it was being started (what failed then,
			// a delivery of secrets say, is a consequence): say why it died.
			reason, extra = earlyReason(code, out), earlyExtra(code)
		}
		s.events.emit(id, store.Event{Kind: "sandbox.failed", Reason: reason, Extra: extra}, store.StateFailed)
		return
	}
	if len(l.handle.Ports) > 0 || (l.resolved != nil && len(l.resolved.Sandbox.Ports) > 0) {
		s.recordPorts(id, l.handle.Ports)
	}
	s.events.emitWith(id, store.Event{Kind: "sandbox.started", Extra: s.lives.takeSteps(l)}, "", unpark)
	if final != nil {
		s.status.finalLocked(id, l, final) // the run ended while it was being started
	}
	gen := l.tailGen
	l.ingestMu.Unlock()
	s.status.spawnFollower(id, l, gen)
	if r := l.resolved; r != nil && r.Sandbox.Egress != nil { // egress rules: a proxy whose denials to follow
		s.status.followEgress(id, l)
	}
}

// Resume starts a created, stopped or failed sandbox. secrets are the values of
// its manifest the caller sends again (a daemon that restarted has none).
func (s *Service) Resume(id string, secrets map[string]string) (Sandbox, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return Sandbox{}, err
	}
	switch rec.State {
	case store.StatePending, store.StateStopped, store.StateFailed:
	default:
		return Sandbox{}, notIn(id, rec.State, "")
	}
	if rec.Kind == backend.KindRun && rec.State != store.StatePending {
		// A run's main command runs once: a CLI asking again after its
		// daemon restarted must not start it a second time.
		return s.view(rec), nil
	}
	if rec.State != store.StatePending && s.claimedFromPool(id) {
		// Its supervisor is a parked one: started again, it would wait for a
		// claim nobody sends.
		return Sandbox{}, errorf(store.ErrInvalidState, "cannot resume sandbox %s: it was claimed from a warm pool, and such a sandbox runs once (create another)", id)
	}
	if rec.State == store.StatePending && rec.ContainerID != "" && !rec.Parked && s.rtOf(id).Running(s.ctx, rec.ContainerID) {
		// Started already (by a daemon that went away before recording it):
		// starting it again would break its stream. Recovery follows it when
		// it found it running; one whose start (the killed daemon's call, in
		// flight) the Engine finished after recovery found it created is
		// recorded and followed now, as recovery would have.
		l := s.lives.of(id)
		l.ingestMu.Lock()
		following := l.tailGen > 0
		l.ingestMu.Unlock()
		if !following {
			s.goAsync(func() {
				l.mu.Lock()
				defer l.mu.Unlock()
				l.ingestMu.Lock()
				following := l.tailGen > 0
				l.ingestMu.Unlock()
				if !following {
					s.recovery.foundStarted(id)
					s.status.startTailAt(id, l, s.status.recordedOffset(id))
				}
			})
		}
		return s.view(rec), nil
	}
	l := s.lives.of(id)
	s.goAsync(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.resolved == nil {
			// A daemon that restarted knows the plan and which of its values were
			// substituted, not the values: the caller resends them (airlock up does).
			l.wire = manifest.Wire{File: filepath.Join(rec.Project, manifest.FileName), ProjectDir: rec.Project, Resolved: rec.Plan, Sources: rec.Sources}
			l.values = nil
		}
		if l.resolved == nil || len(secrets) > 0 {
			if len(secrets) > 0 {
				s.holdSecrets(l, secrets)
				l.values = mergeValues(l.values, secrets)
				l.handle = nil // reopen with the values just given
			}
			resolved, err := manifest.FromWire(l.wire, l.values)
			if err != nil {
				s.events.emit(id, store.Event{Kind: "sandbox.failed", Reason: "cannot read the sandbox's manifest back: " + err.Error()}, store.StateFailed)
				return
			}
			l.resolved = resolved
		}
		if rec.State != store.StatePending {
			l.handle = nil // reopen: the Engine knows best what ran before
		}
		if rec.State == store.StateFailed && rec.ContainerID != "" && s.rtOf(id).Running(s.ctx, rec.ContainerID) {
			// The stop or kill that follows a failure (one the status stream
			// reported, one that broke its bounds) may still be on its way:
			// it is done now, so that it cannot end the new start.
			if err := s.rtOf(id).Stop(s.ctx, id); err != nil && s.ctx.Err() == nil {
				s.log.Warn("cannot stop a failed sandbox before its start", "sandbox", id, "error", err.Error())
			}
		}
		s.startLocked(s.lives.beginOp(l), id, l)
	})
	return s.view(rec), nil
}

// mergeValues is base with the values of over put in (a new map).
func mergeValues(base, over map[string]string) map[string]string {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}
