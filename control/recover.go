package control

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
)

// recovery reconciles the store with the backends when the daemon starts
// (recover), and records a start its daemon went away before recording
// (foundStarted). It sees of the daemon only these fields.
type recovery struct {
	store     *store.Store
	retention time.Duration
	ctx       func() context.Context // the daemon's, ended when it stops
	log       func() *slog.Logger
	status    *follower // follows the streams of the sandboxes found running
	goAsync   func(f func())
	liveOf    func(id string) *live
	rtOf      func(id string) backend.Backend
	emit      func(id string, ev store.Event, state string) (store.Event, error)
	// stopFailed and finishDelete end what a sandbox's daemon left half done.
	stopFailed   func(id string)
	finishDelete func(id, reason string)
}

// newRecovery returns the recovery of s's sandboxes.
func newRecovery(s *Service) *recovery {
	return &recovery{
		store: s.store, retention: s.cfg.retention(),
		ctx: func() context.Context { return s.ctx }, log: func() *slog.Logger { return s.log },
		status: s.status, goAsync: s.goAsync, liveOf: s.lives.of, rtOf: s.rtOf, emit: s.events.emit,
		stopFailed: s.stopFailed, finishDelete: s.finishDelete,
	}
}

// recover reconciles the store with Docker when the daemon starts (design.md §8):
// running primaries stay (or become) ready, missing or exited ones of a ready
// sandbox become failed, pending ones fail, deleting ones finish.
func (rc *recovery) recover() {
	recs, err := rc.store.List(store.Filter{})
	if err != nil {
		rc.log().Error("cannot list sandboxes for recovery", "error", err.Error())
		return
	}
	for _, rec := range recs {
		id := rec.ID
		switch rec.State {
		case store.StatePending:
			if rec.Parked {
				if !rc.claimMayHaveRun(rec) {
					// Taken from a warm pool; its claim went with the daemon.
					rc.emit(id, store.Event{Kind: "sandbox.failed", Reason: "the daemon restarted before the pooled sandbox got its command"}, store.StateFailed)
					rc.goAsync(func() { _ = rc.rtOf(id).Remove(rc.ctx(), id) })
					continue
				}
				// Its CLI waits, attached to its main command, and its claim may
				// have reached the supervisor before the daemon went: the main
				// command runs or ran, or the claim's stream ended with the
				// daemon and the supervisor ends with 125 and says why. What the
				// container does is the run's outcome, followed as a started
				// sandbox's below; removing it now would lose its output and
				// code (the CLI replays them).
				if _, err := rc.store.Update(id, func(r *store.Sandbox) error { r.Parked = false; return nil }); err == nil {
					rec.Parked = false
				}
			}
			if rec.ContainerID != "" && rc.rtOf(id).Running(rc.ctx(), rec.ContainerID) {
				// Started, not yet reported ready: its supervisor goes on;
				// its stream tells what happened (ready or failed). A daemon
				// that went away before recording the start left the run
				// closed, where the stream's ready would be dropped.
				rc.foundStarted(id)
				l := rc.liveOf(id)
				l.mu.Lock()
				rc.status.startTailAt(id, l, rc.status.recordedOffset(id))
				l.mu.Unlock()
				continue
			}
			if rec.ContainerID != "" {
				if code := rc.rtOf(id).ExitCode(rc.ctx(), rec.ContainerID); code != nil {
					// Started and ended while no daemon ran (a quick main
					// command): its stream and end are recorded now; it is
					// not started again.
					rc.foundStarted(id)
					rc.status.primaryDied(id, rc.liveOf(id), code, "", false)
					continue
				}
			}
			if rec.Kind == backend.KindRun && rec.CLIPid > 0 && processAlive(rec.CLIPid, rec.CLIStart) {
				// Created, not started, and its CLI waits: it starts it again
				// through this daemon (airlock run retries). Or its making was
				// cut short (no container recorded): its CLI, which holds what
				// this daemon lacks (the command, the substituted values),
				// removes it and asks for another; nothing of it ran. Failing
				// it here would end a run whose CLI is alive. If that CLI goes,
				// the reaper removes it.
				rc.log().Info("left a pending run sandbox to its CLI", "sandbox", id, "container", rec.ContainerID, "cli_pid", rec.CLIPid)
				continue
			}
			rc.emit(id, store.Event{Kind: "sandbox.failed", Reason: "the daemon restarted while the sandbox was being created"}, store.StateFailed)
			rc.goAsync(func() { _ = rc.rtOf(id).Remove(rc.ctx(), id) })
		case store.StateDeleting:
			rc.goAsync(func() { rc.finishDelete(id, rec.Reason) })
		case store.StateReady, store.StateStopped, store.StateFailed, store.StatePaused:
			in, err := rc.rtOf(id).Get(rc.ctx(), id)
			switch {
			case err != nil && rec.State != store.StateFailed:
				rc.emit(id, store.Event{Kind: "sandbox.failed", Reason: "its container is missing"}, store.StateFailed)
			case err != nil:
			case rc.recoverPaused(rec, in.State):
			case in.State == "running" && rec.State != store.StateReady && rc.status.startedNotReady(id):
				// Being started again when the daemon went: its stream tells
				// whether it got ready or failed.
				l := rc.liveOf(id)
				l.mu.Lock()
				rc.status.startTailAt(id, l, rc.status.recordedOffset(id))
				l.mu.Unlock()
			case in.State == "running" && rec.State == store.StateFailed:
				// A sandbox reported failed is not left running (stopFailed).
				rc.stopFailed(id)
			case in.State == "running":
				if rec.State != store.StateReady {
					rc.emit(id, store.Event{Kind: "sandbox.ready", Reason: "found running"}, store.StateReady)
				}
				l := rc.liveOf(id)
				l.mu.Lock()
				rc.status.startTailAt(id, l, rc.status.recordedOffset(id))
				l.mu.Unlock()
			case liveState(rec.State):
				// Record what the supervisor reported while no daemon ran, in order.
				l := rc.liveOf(id)
				rc.status.catchUp(id, l)
				if cur, err := rc.store.Get(id); err == nil && liveState(cur.State) {
					rc.emit(id, store.Event{Kind: "sandbox.failed", Reason: "its container exited while the daemon was down"}, store.StateFailed)
				}
			}
		}
	}
	if n, err := rc.store.Purge(time.Now().Add(-rc.retention)); err == nil && n > 0 {
		rc.log().Info("purged deleted sandboxes", "count", n)
	}
}

// foundStarted records sandbox.started for a sandbox found started whose last
// start is not recorded (its daemon went away first), so that its stream's
// report can end the run.
func (rc *recovery) foundStarted(id string) {
	evs, err := rc.store.Events(id, 0)
	if err != nil {
		return
	}
	for i := len(evs) - 1; i >= 0; i-- {
		switch evs[i].Kind {
		case "sandbox.started", "sandbox.ready", "sandbox.stopped", "sandbox.failed":
			return // its last start is recorded, or a run ended since
		case "sandbox.created":
			rc.emit(id, store.Event{Kind: "sandbox.started", Reason: "found started after the daemon restarted"}, store.StatePending)
			return
		}
	}
}

// claimMayHaveRun says whether a run that took a parked sandbox may have
// delivered its claim before the daemon went: its CLI still waits and its
// container is running or ended (the claim's fate is the container's).
func (rc *recovery) claimMayHaveRun(rec store.Sandbox) bool {
	if rec.ContainerID == "" || rec.Kind != backend.KindRun || rec.CLIPid <= 0 || !processAlive(rec.CLIPid, rec.CLIStart) {
		return false
	}
	// The claim is sent after pool.claimed is recorded: without it, the
	// supervisor still waits for one nobody will send.
	evs, err := rc.store.Events(rec.ID, 0)
	if err != nil || !slices.ContainsFunc(evs, func(e store.Event) bool { return e.Kind == "pool.claimed" }) {
		return false
	}
	rt := rc.rtOf(rec.ID)
	return rt.Running(rc.ctx(), rec.ContainerID) || rt.ExitCode(rc.ctx(), rec.ContainerID) != nil
}
