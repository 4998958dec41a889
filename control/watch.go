package control

import (
	"strconv"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/sandbox"
)

// watchRetry is how long after the Engine's event stream broke it is asked again.
const watchRetry = time.Second

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
					if !sleep(s.ctx, watchRetry) {
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
	// Let the status stream's last lines in first.
	s.catchUp(id, l)
	rec, err := s.store.Get(id)
	if err != nil {
		return
	}
	s.mu.Lock()
	oom, stopping, auto := l.oom, l.stopping, l.removeOnExit
	s.mu.Unlock()
	switch {
	case oom:
		if rec.State == store.StateReady || rec.State == store.StatePending {
			s.emit(id, store.Event{Kind: "sandbox.failed", Reason: "oom_killed", ExitCode: codep}, store.StateFailed)
		}
		return
	case stopping != "":
		// A requested stop or delete records its own end once the Engine
		// confirms the container stopped (its state may lag this event).
		return
	case l.startInProgress():
		// The start path records sandbox.started (or its failure) first; its
		// stream follower then finds the container stopped and reports it again.
		return
	case s.startedNotReady(id):
		s.failEarly(id, rec, codep)
	default:
		s.markStopped(id, "exited", codep)
	}
	if auto {
		// A run whose CLI has the exit code from the Engine: the daemon
		// removes it, as docker run --rm does.
		_, _ = s.delete(id, "exited")
	}
}
