package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/manifest"
)

// wireManifest splits a resolved manifest into what the daemon may keep (every
// substituted value masked) and the substituted values, which travel beside it
// and stay in the daemon's memory (manifest.Wire; the daemon reads it back with
// manifest.FromWire).
func wireManifest(r *manifest.Resolved) (*client.Manifest, map[string]string, error) {
	r = withHostUser(r, os.Getuid(), os.Getgid())
	w, values, err := r.ToWire()
	if err != nil {
		return nil, nil, err
	}
	wm := client.Manifest(w)
	return &wm, values, nil
}

// failure turns a sandbox.failed event into the CLI's error and exit code.
func failure(ev client.Event) error {
	code := ExitAirlock
	if c, err := strconv.Atoi(ev.Extra["exit_code"]); err == nil && c != 0 {
		code = c
	}
	if code == ExitUsage {
		return configError(errors.New(ev.Reason))
	}
	return withCode(code, errors.New(ev.Reason))
}

// apiFailure maps a daemon API error to an exit code.
func apiFailure(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) {
		switch ce.Reason {
		case client.ReasonConfig, client.ReasonInvalidID, client.ReasonIDAlreadyUsed, client.ReasonInvalidRequest, client.ReasonBadCursor:
			return withCode(ExitUsage, errors.New(ce.Message))
		case client.ReasonSandboxNotFound, client.ReasonInvalidState, client.ReasonExecNotFound, client.ReasonNotSupported:
			return withCode(ExitFailure, errors.New(ce.Message))
		}
		return withCode(ExitAirlock, errors.New(ce.Message))
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return withCode(ExitAirlock, err)
}

// waitCreated follows a new sandbox's events until it is created (or fails).
// sayQueued prints, on a terminal, why sandbox id waits for its turn on its
// Engine (sandbox.queued, after events from), once, until ctx ends.
func (a *app) sayQueued(ctx context.Context, c *client.Client, id string, from uint64) {
	if a.opts.quiet || !isTerminal(a.stderr) {
		return
	}
	go func() {
		if ev, err := c.WaitEvent(ctx, id, from, "sandbox.queued"); err == nil {
			fmt.Fprintf(a.stderr, "airlock: %s\n", ev.Reason)
		}
	}()
}

func waitCreated(ctx context.Context, c *client.Client, id string) (string, error) {
	ev, err := c.WaitEvent(ctx, id, 0, "sandbox.created", "sandbox.failed")
	if err != nil {
		return "", apiFailure(err)
	}
	if ev.Kind == "sandbox.failed" {
		return "", failure(ev)
	}
	return ev.Extra["container"], nil
}

// withHostUser resolves sandbox.user = "host" (manifest.HostUser) to the
// "uid:gid" of the user running this CLI, on the client's side: the daemon
// (which may run as another user, or on another machine through -H) gets the
// numbers, never "host". r itself is not changed (config shows "host").
func withHostUser(r *manifest.Resolved, uid, gid int) *manifest.Resolved {
	if r.Sandbox.User != manifest.HostUser {
		return r
	}
	c := *r
	c.Sandbox.User = fmt.Sprintf("%d:%d", uid, gid)
	return &c
}

// runFailure is err from the daemon about a run's sandbox, unless the daemon
// refused because the sandbox failed meanwhile (a daemon started again failed
// it as it recovered): then the run ends as its sandbox did, with the
// failure's reason and exit code.
func runFailure(ctx context.Context, c *client.Client, id string, err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Reason != client.ReasonInvalidState {
		return apiFailure(err)
	}
	sb, gerr := c.Get(ctx, id)
	if gerr != nil || sb.State != client.StateFailed {
		return apiFailure(err)
	}
	st, serr := c.Events(ctx, id, 0, false)
	if serr != nil {
		return apiFailure(err)
	}
	defer st.Close()
	var last *client.Event
	for {
		ev, nerr := st.Next()
		if nerr != nil {
			break
		}
		if ev.Kind == "sandbox.failed" {
			last = &ev
		}
	}
	if last == nil {
		return apiFailure(err)
	}
	return failure(*last)
}
