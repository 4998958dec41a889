package control

import (
	"context"
	"log/slog"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/internal/proc"
)

// reaper is the daemon's housekeeping while it runs: it stops idle sandboxes
// (idle.go), removes run sandboxes whose CLI is gone and what is left of
// them on the Engines (orphans.go), finishes removals that stalled, and purges
// old history. It sees of the daemon only these fields.
type reaper struct {
	store                        *store.Store
	interval, idleTTL, retention time.Duration
	ctx                          func() context.Context // the daemon's, ended when it stops
	log                          func() *slog.Logger
	lives                        *lives // what the daemon holds of each sandbox, its clients and idle clock

	goAsync      func(f func())
	runtimes     func() []backend.Backend
	stop         func(id, reason string) (Sandbox, error)
	delete       func(id, reason string) (Sandbox, error)
	finishDelete func(id, reason string)
	drainIdle    func() // the warm pools' (pool.Pools.DrainIdle)
	// expireIdle ends a ready sandbox with an idle timeout of its own once it
	// was idle that long (expiry.idle): idle_ttl is not applied to it.
	expireIdle func(rec store.Sandbox)
}

// newReaper returns the reaper of s's sandboxes.
func newReaper(s *Service) *reaper {
	return &reaper{
		store: s.store, interval: s.cfg.ReapInterval, idleTTL: s.cfg.IdleTTL, retention: s.cfg.retention(),
		ctx: func() context.Context { return s.ctx }, log: func() *slog.Logger { return s.log },
		lives:   s.lives,
		goAsync: s.goAsync, runtimes: s.runtimes, stop: s.Stop, delete: s.delete, finishDelete: s.finishDelete,
		drainIdle: func() { s.pools.DrainIdle() }, expireIdle: s.expiry.idle,
	}
}

// reap stops idle sandboxes, removes run sandboxes whose CLI is gone, and purges
// old history.
func (rp *reaper) reap() {
	tick := time.NewTicker(rp.interval)
	defer tick.Stop()
	lastPurge := time.Now()
	for {
		select {
		case <-rp.ctx().Done():
			return
		case <-tick.C:
		}
		recs, err := rp.store.List(store.Filter{})
		if err != nil {
			continue
		}
		for _, rec := range recs {
			switch {
			case rec.Kind == backend.KindRun && rec.CLIPid > 0 && rec.State != store.StateDeleting && !rp.mainEnded(rec.ID) && !processAlive(rec.CLIPid, rec.CLIStart):
				rp.log().Info("reaping a run sandbox whose CLI is gone", "sandbox", rec.ID, "cli_pid", rec.CLIPid)
				_, _ = rp.delete(rec.ID, "cli_gone")
			case rec.State == store.StateDeleting && time.Since(rec.UpdatedAt) > 10*time.Second:
				id, reason := rec.ID, rec.Reason
				rp.goAsync(func() { rp.finishDelete(id, reason) })
			case liveState(rec.State) && rec.IdleTimeout > 0:
				// A paused sandbox's idle clock runs too (pause.go).
				rp.expireIdle(rec)
			case liveState(rec.State) && rec.Kind == backend.KindUp && rp.idle(rec.ID):
				rp.log().Info("stopping an idle sandbox", "sandbox", rec.ID, "idle_ttl", rp.idleTTL.String())
				_, _ = rp.stop(rec.ID, "idle_ttl")
			}
		}
		rp.reapOrphans()
		rp.drainIdle()
		if time.Since(lastPurge) > time.Minute {
			lastPurge = time.Now()
			_, _ = rp.store.Purge(time.Now().Add(-rp.retention))
		}
	}
}

// processAlive reports whether pid runs and started at start (field 22 of
// /proc/PID/stat), so that a reused pid is not mistaken for the CLI.
func processAlive(pid int, start string) bool {
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	state, started, ok := proc.State(pid)
	return ok && state != "Z" && (start == "" || started == start)
}

// mainEndGrace is how long after its end marker a fast-ended run's primary
// may still shut its daemons down with no CLI before the reaper removes it (a
// marker forged by the main command ends its CLI, not its sandbox, for long).
const mainEndGrace = 2 * time.Minute

// mainEnded reports whether a run's main command ended with its end marker
// (live.mainEnded) less than mainEndGrace ago. It makes no live state for a
// record this daemon holds none of (the reaper asks of every run).
func (rp *reaper) mainEnded(id string) bool {
	rp.lives.mu.Lock()
	defer rp.lives.mu.Unlock()
	l, ok := rp.lives.m[id]
	return ok && !l.mainEnded.IsZero() && time.Since(l.mainEnded) < mainEndGrace
}
