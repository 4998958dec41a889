package control

import (
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/internal/proc"
)

// reap stops idle sandboxes, removes run sandboxes whose CLI is gone, and purges
// old history.
func (s *Service) reap() {
	tick := time.NewTicker(s.cfg.ReapInterval)
	defer tick.Stop()
	lastPurge := time.Now()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		recs, err := s.store.List(store.Filter{})
		if err != nil {
			continue
		}
		for _, rec := range recs {
			switch {
			case rec.Kind == backend.KindRun && rec.CLIPid > 0 && rec.State != store.StateDeleting && !s.mainEnded(rec.ID) && !processAlive(rec.CLIPid, rec.CLIStart):
				s.log.Info("reaping a run sandbox whose CLI is gone", "sandbox", rec.ID, "cli_pid", rec.CLIPid)
				_, _ = s.delete(rec.ID, "cli_gone")
			case rec.State == store.StateDeleting && time.Since(rec.UpdatedAt) > 10*time.Second:
				id, reason := rec.ID, rec.Reason
				s.goAsync(func() { s.finishDelete(id, reason) })
			case rec.State == store.StateReady && rec.Kind == backend.KindUp && s.idle(rec.ID):
				s.log.Info("stopping an idle sandbox", "sandbox", rec.ID, "idle_ttl", s.cfg.IdleTTL.String())
				_, _ = s.Stop(rec.ID, "idle_ttl")
			}
		}
		s.reapOrphans()
		s.pools.DrainIdle()
		if time.Since(lastPurge) > time.Minute {
			lastPurge = time.Now()
			_, _ = s.store.Purge(time.Now().Add(-s.retention()))
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
func (s *Service) mainEnded(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.live[id]
	return ok && !l.mainEnded.IsZero() && time.Since(l.mainEnded) < mainEndGrace
}
