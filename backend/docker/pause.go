package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
)

var _ backend.Pauser = (*Runtime)(nil)

// Pause freezes the sandbox's primary (its supervisor, daemons and execs) and
// its services' containers with the Engine's container pause (the cgroup
// freezer): nothing of it is scheduled, its memory stays. The egress proxy is
// left running: nothing inside can reach it while frozen. The containers are
// frozen at once, side by side; a failure thaws those that were.
func (rt *Runtime) Pause(ctx context.Context, id string) error {
	return freezer{engine: rt.Engine, owner: ownerKey(rt.Owner)}.pause(ctx, id)
}

// Unpause thaws what Pause froze.
func (rt *Runtime) Unpause(ctx context.Context, id string) error {
	return freezer{engine: rt.Engine, owner: ownerKey(rt.Owner)}.unpause(ctx, id)
}

// freezer pauses and unpauses the containers of a sandbox.
type freezer struct {
	engine client.APIClient
	owner  ownerKey
}

// The Engine's words for a container's state (container.Summary.State).
const (
	stateRunning = "running"
	statePaused  = "paused"
)

// members are the containers a pause freezes: the primary and the services.
func (f freezer) members(ctx context.Context, id string) ([]container.Summary, error) {
	objs, err := listObjects(ctx, f.engine, f.owner, id)
	if err != nil {
		return nil, err
	}
	if objs.primary == nil {
		return nil, fmt.Errorf("%w: %s", backend.ErrNotFound, id)
	}
	return append([]container.Summary{*objs.primary}, objs.services...), nil
}

func (f freezer) pause(ctx context.Context, id string) error {
	cs, err := f.members(ctx, id)
	if err != nil {
		return err
	}
	if st := cs[0].State; st != stateRunning && st != statePaused {
		return failed("cannot pause sandbox %s: its container is %s, not running", id, st)
	}
	if err := f.converge(ctx, id, cs, statePaused); err != nil {
		// Not half frozen: what was frozen is thawed again.
		_ = f.converge(context.WithoutCancel(ctx), id, nil, stateRunning)
		return failed("cannot pause sandbox %s: %v", id, err)
	}
	return nil
}

func (f freezer) unpause(ctx context.Context, id string) error {
	cs, err := f.members(ctx, id)
	if err != nil {
		return err
	}
	if err := f.converge(ctx, id, cs, stateRunning); err != nil {
		return failed("cannot unpause sandbox %s: %v", id, err)
	}
	return nil
}

// thaw unpauses those of cs that are paused (a stop's first step).
func (f freezer) thaw(ctx context.Context, cs []container.Summary) error {
	_, err := each(needing(cs, stateRunning), f.op(ctx, stateRunning))
	return err
}

// converge pauses (want statePaused) or unpauses (stateRunning) those of cs
// (nil: listed now) that are not so yet, side by side. Engine 20.10 also takes
// a container's paused flag from containerd's events: one that comes late (a
// pause and an unpause of one container a few milliseconds apart) leaves the
// flag wrong for a moment, and the Engine answers "is already paused" or "is
// not paused" to what it should do. Those are listed and tried again, a few
// times, after a short wait.
func (f freezer) converge(ctx context.Context, id string, cs []container.Summary, want string) error {
	for attempt := 1; ; attempt++ {
		if cs == nil {
			var err error
			if cs, err = f.members(ctx, id); err != nil {
				return err
			}
		}
		_, err := each(needing(cs, want), f.op(ctx, want))
		if err == nil || attempt == 4 || !(staleFlag(err) || freezeRace(err)) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 25 * time.Millisecond):
		}
		cs = nil
	}
}

// needing are those of cs, running or paused, that are not in state want.
func needing(cs []container.Summary, want string) []container.Summary {
	var out []container.Summary
	for _, c := range cs {
		if c.State != want && (c.State == stateRunning || c.State == statePaused) {
			out = append(out, c)
		}
	}
	return out
}

// op is the Engine's call that brings a container to state want.
func (f freezer) op(ctx context.Context, want string) func(container.Summary) error {
	if want == statePaused {
		return func(c container.Summary) error { return f.engine.ContainerPause(ctx, c.ID) }
	}
	return func(c container.Summary) error { return f.engine.ContainerUnpause(ctx, c.ID) }
}

// staleFlag reports whether err holds only the Engine's answers of a paused
// flag that is not what the container is (see converge).
func staleFlag(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "is already paused") || strings.Contains(msg, "is not paused")
}

// freezeRace reports whether err is runc's failure to freeze a container
// whose processes were being made meanwhile ("unable to freeze": the cgroup
// v1 freezer gave up; Engine 29 with runc 1.3 answered it once to a
// snapshot's pause): another try usually freezes it.
func freezeRace(err error) bool {
	return strings.Contains(err.Error(), "unable to freeze")
}

// pauseRetrying pauses container id, again (up to 4 tries) while runc fails
// to freeze it for a passing race (freezeRace).
func pauseRetrying(ctx context.Context, engine client.APIClient, id string) error {
	for attempt := 1; ; attempt++ {
		err := engine.ContainerPause(ctx, id)
		if err == nil || attempt == 4 || !freezeRace(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 25 * time.Millisecond):
		}
	}
}

// each runs op on every container at once and returns those it succeeded on,
// and the errors of the others (a container gone meanwhile is no error).
func each(cs []container.Summary, op func(container.Summary) error) ([]container.Summary, error) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		ok   []container.Summary
		errs []error
	)
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := op(c)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok = append(ok, c)
			case !cerrdefs.IsNotFound(err):
				errs = append(errs, fmt.Errorf("%s: %w", containerName(c), err))
			}
		}()
	}
	wg.Wait()
	return ok, errors.Join(errs...)
}

// containerName is how an error names a container: its name, else its ID.
func containerName(c container.Summary) string {
	if len(c.Names) > 0 {
		return strings.TrimPrefix(c.Names[0], "/")
	}
	return c.ID
}
