package control

import (
	"context"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
)

// watchRetry is how long after the Engine's event stream broke it is asked again.
const watchRetry = time.Second

// watchEngine records deaths and OOM kills of primaries on one backend while the
// daemon runs.
func (f *follower) watchEngine(rt backend.Backend) {
	for f.ctx().Err() == nil {
		err := rt.WatchPrimaries(f.ctx(), f.onPrimaryEvent)
		if f.ctx().Err() != nil {
			return
		}
		if err != nil {
			f.log().Warn("engine events ended; watching again", "error", err.Error())
		}
		if !sleep(f.ctx(), watchRetry) {
			return
		}
	}
}

func (f *follower) onPrimaryEvent(ev backend.PrimaryEvent) {
	id, ok := f.recordID(ev.SandboxID)
	if !ok {
		return // not one of this daemon's sandboxes
	}
	l := f.liveOf(id)
	switch {
	case ev.OOM:
		f.setFlags(l, func() { l.oom = true })
	case ev.Died && ev.ExitCode != nil && *ev.ExitCode == 137 && f.mayBeLateOOM(id, l):
		// Maybe killed for its memory: the kill's event may come after this
		// one, on this stream, which must not wait for it (primaryDied may).
		// Any other death is handled here, in the stream's order (a sandbox
		// started again after it must not be failed by it).
		f.goAsync(func() { f.primaryDied(id, l, ev.ExitCode, ev.Reason, true) })
	case ev.Died:
		f.primaryDied(id, l, ev.ExitCode, ev.Reason, true)
	}
}

// mayBeLateOOM says whether sandbox id's primary, which ended with 137, may
// have been killed for its memory limit with the Engine's word of it still to
// come: it has a limit, and neither the oom event nor the Engine's flag said
// so yet.
func (f *follower) mayBeLateOOM(id string, l *live) bool {
	f.mu.Lock()
	oom := l.oom
	f.mu.Unlock()
	rec, err := f.store.Get(id)
	r, ok := f.rtOf(id).(backend.OOMReporter)
	if oom || err != nil || rec.ContainerID == "" || !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(f.ctx(), 5*time.Second)
	defer cancel()
	killed, limited := r.OOMKilled(ctx, rec.ContainerID)
	return limited && !killed
}

// oomSettle bounds how long the end (137) of a primary with a memory limit
// waits for the Engine to say it was killed for it.
const oomSettle = 1500 * time.Millisecond

// awaitOOM says whether a primary that ended with 137 was killed for its
// memory limit: its oom event came (flag) or the backend says so. Engine
// 20.10 reports a kill it learned of after the exit only by an oom event after
// the die event, so for a container with a memory limit it asks again for a
// short while (oomSettle); one without is answered at once.
func awaitOOM(ctx context.Context, r backend.OOMReporter, containerID string, flag func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, oomSettle)
	defer cancel()
	for {
		if flag() {
			return true
		}
		killed, limited := r.OOMKilled(ctx, containerID)
		if killed || flag() {
			return true
		}
		if !limited {
			return false
		}
		select {
		case <-ctx.Done():
			return flag()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// primaryDied records that a sandbox's primary container stopped: from the
// Engine's die event, or when the stream's follower finds it stopped (a die
// event missed: the watch began late, the Engine restarted). why, when the
// backend took the primary away (a Pod evicted, its node lost), fails the
// sandbox with that reason. fromEvent says the Engine's event reports it: such
// an event may reach the daemon late, after the sandbox was started again (a
// stop recorded, then a resume), and a primary that runs again does not
// answer for an earlier run's death.
func (f *follower) primaryDied(id string, l *live, codep *int, why string, fromEvent bool) {
	l.diedMu.Lock() // the die event and the follower may both report it
	defer l.diedMu.Unlock()
	// Let the status stream's last lines in first.
	f.catchUp(id, l)
	rec, err := f.store.Get(id)
	if err != nil {
		return
	}
	// A primary the backend took away (why) is gone whatever its record
	// says: a lost node's Pod still reads Running. Running alone is not
	// enough either: an init killed for its memory leaves processes counted
	// in its cgroup for a moment; the Engine's own state says it exited.
	if fromEvent && why == "" && rec.State != store.StateDeleting && rec.State != store.StateDeleted && rec.ContainerID != "" &&
		f.rtOf(id).Running(f.ctx(), rec.ContainerID) && f.rtOf(id).ExitCode(f.ctx(), rec.ContainerID) == nil {
		f.log().Debug("an earlier run's death, reported late", "sandbox", id)
		return
	}
	f.mu.Lock()
	oom, stopping, auto := l.oom, l.stopping, l.removeOnExit
	f.mu.Unlock()
	if !oom && codep != nil && *codep == 137 && rec.ContainerID != "" {
		// The end may be reported (the stream's follower found the primary
		// stopped) before the Engine's oom event: ask the backend.
		if r, ok := f.rtOf(id).(backend.OOMReporter); ok {
			oom = awaitOOM(f.ctx(), r, rec.ContainerID, func() bool {
				f.mu.Lock()
				defer f.mu.Unlock()
				return l.oom
			})
		}
	}
	switch {
	case oom:
		if liveState(rec.State) || rec.State == store.StatePending {
			f.emit(id, store.Event{Kind: "sandbox.failed", Reason: "oom_killed", ExitCode: codep}, store.StateFailed)
		}
		// A run removed on exit goes too: its CLI, which had the code
		// (at the end marker, before the kill was known), left it to us.
	case stopping != "":
		// A requested stop or delete records its own end once the Engine
		// confirms the container stopped (its state may lag this event).
		return
	case l.startInProgress():
		// The start path records sandbox.started (or its failure) first; its
		// stream follower then finds the container stopped and reports it again.
		return
	case why != "":
		if liveState(rec.State) || rec.State == store.StatePending {
			f.flushCounts(id, l, false)
			f.emit(id, store.Event{Kind: "sandbox.failed", Reason: why, ExitCode: codep}, store.StateFailed)
		}
	case f.startedNotReady(id):
		f.failEarly(id, rec, codep)
	default:
		f.markStopped(id, "exited", codep)
	}
	if auto {
		// A run whose CLI has the exit code from the Engine: the daemon
		// removes it, as docker run --rm does.
		_, _ = f.delete(id, "exited")
	}
}
