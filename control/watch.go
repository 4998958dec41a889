package control

import (
	"strconv"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/sandbox"
)

// recover reconciles the store with Docker when the daemon starts (DESIGN §8):
// running primaries stay (or become) ready, missing or exited ones of a ready
// sandbox become failed, pending ones fail, deleting ones finish.
func (s *Service) recover() {
	recs, err := s.store.List(store.Filter{})
	if err != nil {
		s.log.Error("cannot list sandboxes for recovery", "error", err.Error())
		return
	}
	for _, rec := range recs {
		id := rec.ID
		switch rec.State {
		case store.StatePending:
			if rec.ContainerID != "" && s.rtOf(id).Running(s.ctx, rec.ContainerID) {
				// Started, not yet reported ready: its supervisor goes on;
				// its stream tells what happened (ready or failed).
				l := s.liveOf(id)
				l.mu.Lock()
				s.startTailAt(id, l, s.recordedOffset(id))
				l.mu.Unlock()
				continue
			}
			if rec.ContainerID != "" && rec.Kind == sandbox.KindRun && rec.CLIPid > 0 && processAlive(rec.CLIPid, rec.CLIStart) {
				// Created, not started, and its CLI waits: it starts it again
				// through this daemon (airlock run retries).
				continue
			}
			s.emit(id, store.Event{Kind: "sandbox.failed", Reason: "the daemon restarted while the sandbox was being created"}, store.StateFailed)
			s.wg.Add(1)
			go func() { defer s.wg.Done(); _ = s.rtOf(id).Remove(s.ctx, id) }()
		case store.StateDeleting:
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.finishDelete(id, rec.Reason) }()
		case store.StateReady, store.StateStopped, store.StateFailed:
			in, err := s.rtOf(id).Get(s.ctx, id)
			switch {
			case err != nil && rec.State != store.StateFailed:
				s.emit(id, store.Event{Kind: "sandbox.failed", Reason: "its container is missing"}, store.StateFailed)
			case err != nil:
			case in.State == "running":
				if rec.State != store.StateReady {
					s.emit(id, store.Event{Kind: "sandbox.ready", Reason: "found running"}, store.StateReady)
				}
				l := s.liveOf(id)
				l.mu.Lock()
				s.startTailAt(id, l, s.recordedOffset(id))
				l.mu.Unlock()
			case rec.State == store.StateReady:
				// Record what the supervisor reported while no daemon ran, in order.
				l := s.liveOf(id)
				s.catchUp(id, l)
				if cur, err := s.store.Get(id); err == nil && cur.State == store.StateReady {
					s.emit(id, store.Event{Kind: "sandbox.failed", Reason: "its container exited while the daemon was down"}, store.StateFailed)
				}
			}
		}
	}
	if n, err := s.store.Purge(time.Now().Add(-s.retention())); err == nil && n > 0 {
		s.log.Info("purged deleted sandboxes", "count", n)
	}
}

func (s *Service) retention() time.Duration {
	if s.cfg.EventRetentionTTL > 0 {
		return s.cfg.EventRetentionTTL
	}
	return 168 * time.Hour
}

// watchEngine records deaths and OOM kills of primaries on one Engine while the
// daemon runs.
func (s *Service) watchEngine(rt *sandbox.Runtime) {
	for s.ctx.Err() == nil {
		args := filters.NewArgs(filters.Arg("type", "container"), filters.Arg("label", sandbox.LabelRole+"=primary"),
			filters.Arg("event", "die"), filters.Arg("event", "oom"))
		if rt.Owner != "" {
			args.Add("label", sandbox.LabelOwner+"="+rt.Owner)
		}
		msgs, errs := rt.Engine.Events(s.ctx, events.ListOptions{Filters: args})
	loop:
		for {
			select {
			case <-s.ctx.Done():
				return
			case err := <-errs:
				if err != nil && s.ctx.Err() == nil {
					s.log.Warn("engine events ended; watching again", "error", err.Error())
					select {
					case <-time.After(time.Second):
					case <-s.ctx.Done():
						return
					}
				}
				break loop
			case m := <-msgs:
				s.onEngineEvent(m)
			}
		}
	}
}

func (s *Service) onEngineEvent(m events.Message) {
	id := m.Actor.Attributes[sandbox.LabelSandbox]
	if id == "" {
		return
	}
	if _, err := s.store.Get(id); err != nil {
		return // not one of this daemon's sandboxes
	}
	l := s.liveOf(id)
	switch m.Action {
	case events.ActionOOM:
		s.setFlags(l, func() { l.oom = true })
	case events.ActionDie:
		code, err := strconv.Atoi(m.Actor.Attributes["exitCode"])
		var codep *int
		if err == nil {
			codep = &code
		}
		s.primaryDied(id, l, codep)
	}
}

// primaryDied records that a sandbox's primary container stopped: from the
// Engine's die event, or when the stream's follower finds it stopped (a die
// event missed: the watch began late, the Engine restarted).
func (s *Service) primaryDied(id string, l *live, codep *int) {
	l.diedMu.Lock() // the die event and the follower may both report it
	defer l.diedMu.Unlock()
	{
		// Let the status stream's last lines in first.
		s.ingestLive(id, l)
		rec, gerr := s.store.Get(id)
		if gerr != nil {
			return
		}
		s.mu.Lock()
		oom, stopping := l.oom, l.stopping
		s.mu.Unlock()
		switch {
		case oom:
			if rec.State == store.StateReady || rec.State == store.StatePending {
				s.emit(id, store.Event{Kind: "sandbox.failed", Reason: "oom_killed", ExitCode: codep}, store.StateFailed)
			}
		case stopping != "":
			// A requested stop or delete records its own end once the Engine
			// confirms the container stopped (its state may lag this event).
		default:
			s.markStopped(id, "exited", codep)
			s.mu.Lock()
			auto := l.removeOnExit
			s.mu.Unlock()
			if auto {
				// A run whose CLI has the exit code from the Engine: the daemon
				// removes it, as docker run --rm does.
				_, _ = s.delete(id, "exited")
			}
		}
	}
}

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
			case rec.Kind == sandbox.KindRun && rec.CLIPid > 0 && rec.State != store.StateDeleting && !processAlive(rec.CLIPid, rec.CLIStart):
				s.log.Info("reaping a run sandbox whose CLI is gone", "sandbox", rec.ID, "cli_pid", rec.CLIPid)
				_, _ = s.delete(rec.ID, "cli_gone")
			case rec.State == store.StateDeleting && time.Since(rec.UpdatedAt) > 10*time.Second:
				id, reason := rec.ID, rec.Reason
				s.wg.Add(1)
				go func() { defer s.wg.Done(); s.finishDelete(id, reason) }()
			case rec.State == store.StateReady && rec.Kind == sandbox.KindUp && s.idle(rec.ID):
				s.log.Info("stopping an idle sandbox", "sandbox", rec.ID, "idle_ttl", s.cfg.IdleTTL.String())
				_, _ = s.Stop(rec.ID, "idle_ttl")
			}
		}
		s.reapOrphans()
		if time.Since(lastPurge) > time.Minute {
			lastPurge = time.Now()
			_, _ = s.store.Purge(time.Now().Add(-s.retention()))
		}
	}
}

// idle reports whether no client is attached, no exec runs, and nothing used the
// sandbox for idle_ttl.
func (s *Service) idle(id string) bool {
	if s.cfg.IdleTTL <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attached[id] > 0 {
		return false
	}
	if l, ok := s.live[id]; ok && l.execs > 0 {
		return false
	}
	last, ok := s.active[id]
	if !ok {
		s.active[id] = time.Now()
		return false
	}
	return time.Since(last) > s.cfg.IdleTTL
}

// processAlive reports whether pid runs and started at start (field 22 of
// /proc/PID/stat), so that a reused pid is not mistaken for the CLI.
func processAlive(pid int, start string) bool {
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	state, started, ok := ProcessState(pid)
	return ok && state != "Z" && (start == "" || started == start)
}

// reapOrphans removes run sandboxes the store does not know (made before the
// daemon existed, or by a daemon whose store was lost) whose CLI is gone.
func (s *Service) reapOrphans() {
	for _, rt := range s.runtimes() {
		s.reapOrphansOn(rt)
	}
}

func (s *Service) reapOrphansOn(rt *sandbox.Runtime) {
	list, err := rt.List(s.ctx, map[string]string{sandbox.LabelKind: sandbox.KindRun}, true)
	if err != nil {
		return
	}
	for _, in := range list {
		if _, err := s.store.Get(in.ID); err == nil {
			continue
		}
		pid, _ := strconv.Atoi(in.CLIPid)
		if pid <= 0 || processAlive(pid, in.CLIStart) {
			continue
		}
		s.log.Info("removing an unknown run sandbox whose CLI is gone", "sandbox", in.ID, "cli_pid", pid)
		_ = rt.Remove(s.ctx, in.ID)
	}
}
