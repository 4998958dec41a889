package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/supervisor"
)

// LabelPool, on every object of a sandbox made for a warm pool, is the pool's
// key; it stays on the objects of a sandbox a run claimed.
const LabelPool = "dev.airlock.pool"

// ErrUnhealthy is a parked sandbox that refused a claim because something it
// runs is not healthy (a daemon exited), or whose container is gone.
var ErrUnhealthy = errors.New("the parked sandbox is not healthy")

// Claim is what a run gives a parked sandbox: everything of a cold start's
// Request that the pooled sandbox could not know in advance.
type Claim struct {
	// Manifest is the run's resolved manifest: the same plan as the pooled
	// sandbox's (the pool's key says so), with the run's substituted values,
	// delivered with the claim.
	Manifest   *manifest.Resolved
	Command    []string
	Env        []string          // K=V from -e, over [env]
	EnvSecrets map[string]string // -e NAME values from the caller's environment
	Workdir    string            // -w
	Stdin      bool              // the main command reads the attached stdin (else /dev/null)
	Quiet      bool
	EndMarker  string
}

// Claim hands a parked sandbox (made with Request.Park and started) to a run:
// its supervisor reads the claim — the main command, its env and cwd, and the
// values of the run's manifest — from the first line of its stdin, through
// the attach to the main command (one is made when no client attached), and
// then starts the daemons that waited for values and the main command. The
// client's stdin, when it forwards one, follows the claim. A supervisor that
// finds a daemon unhealthy ends the run with 125 and says why.
func (rt *Runtime) Claim(ctx context.Context, sb *Sandbox, c Claim) error {
	if c.Manifest == nil {
		c.Manifest = sb.manifest
	}
	payload, err := ClaimDelivery(c)
	if err != nil {
		return err
	}
	line, err := json.Marshal(payload)
	if err != nil {
		return failed("cannot encode the claim")
	}
	defer rt.step(sb.ID, "claim")()
	sb.claimMu.Lock()
	conn, in := sb.claimConn, sb.claimStdin
	sb.claimConn, sb.claimStdin = nil, nil
	sb.claimMu.Unlock()
	own := conn == nil
	if own {
		resp, err := rt.Engine.ContainerAttach(ctx, sb.PrimaryID, container.AttachOptions{Stream: true, Stdin: true})
		if err != nil {
			if !rt.Running(ctx, sb.PrimaryID) {
				return fmt.Errorf("%w: its container is not running", ErrUnhealthy)
			}
			return failed("cannot attach to the parked sandbox: %v", err)
		}
		conn = &resp
	}
	if _, err := conn.Conn.Write(append(line, '\n')); err != nil {
		conn.Close()
		if !rt.Running(ctx, sb.PrimaryID) {
			return fmt.Errorf("%w: its container is not running", ErrUnhealthy)
		}
		return failed("cannot deliver the claim: %v", err)
	}
	switch {
	case in != nil && c.Stdin:
		go func() {
			_, _ = io.Copy(conn.Conn, in)
			_ = conn.CloseWrite()
		}()
	case own:
		conn.Close()
	default:
		_ = conn.CloseWrite()
	}
	sb.manifest, sb.envSecrets, sb.parked = c.Manifest, c.EnvSecrets, false
	return nil
}

// ClaimDelivery is the delivery of a claim: the run's values by key path (of
// c.Manifest, which is required), and the claim itself under
// supervisor.ClaimKey.
func ClaimDelivery(c Claim) (map[string]string, error) {
	r := c.Manifest
	if r == nil {
		return nil, failed("cannot claim a parked sandbox without the run's manifest")
	}
	req := &Request{Command: c.Command, Env: c.Env, EnvSecrets: c.EnvSecrets, Workdir: c.Workdir}
	sc := supervisor.Claim{
		Argv: c.Command, Cwd: workdir(req, r), Quiet: c.Quiet, EndMarker: c.EndMarker, Stdin: c.Stdin,
	}
	// The run's own entries (-e): the manifest's are in the parked spec.
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		sc.Env = append(sc.Env, supervisor.EnvEntry{Name: k, Value: &v})
	}
	for _, k := range slices.Sorted(maps.Keys(c.EnvSecrets)) {
		sc.Env = append(sc.Env, supervisor.EnvEntry{Name: k, Secret: envSecretKey(k)})
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return nil, failed("cannot encode the claim: %v", err)
	}
	values := secretValues(r)
	for k, v := range c.EnvSecrets {
		values[envSecretKey(k)] = v
	}
	values[supervisor.ClaimKey] = string(b)
	return values, nil
}

// WatchParked follows a started pooled sandbox's status stream: parked is
// called once its supervisor parked (services healthy, value-free daemons
// ready). It returns why the sandbox can no longer serve a claim — its
// supervisor failed, a daemon exited or gave up, the container stopped — or
// nil when ctx ends.
func (rt *Runtime) WatchParked(ctx context.Context, sb *Sandbox, parked func()) error {
	return WatchParkedStatus(ctx, rt, sb.PrimaryID, parked)
}

// WatchParkedStatus is WatchParked on any backend that runs execs.
func WatchParkedStatus(ctx context.Context, ex Execer, containerID string, parked func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Without reporting what it read (StatusReadIn): the supervisor of the
	// run that claims it must not wait at its exit for a follower gone.
	rc, err := TailFile(ctx, ex, containerID, supervisor.StatusFile, 0, true, "")
	if err != nil {
		return failed("cannot follow the pooled sandbox's status: %v", err)
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), supervisor.MaxStatusLine)
	for sc.Scan() {
		var ev supervisor.StatusEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch ev.Kind {
		case supervisor.KindSupervisorParked:
			parked()
		case supervisor.KindSupervisorFailed:
			return failed("the pooled sandbox failed to start: %s", ev.Reason)
		case supervisor.KindDaemonExited, supervisor.KindDaemonGaveUp:
			return failed("the pooled sandbox's daemon %s exited", ev.Daemon)
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return failed("the pooled sandbox stopped")
}

// CopiedPaths are the host paths whose content a sandbox made from r copies
// in at its creation: the [copies] sources, and the project when it is copied.
// (A warm pool's key fingerprints them.)
func (rt *Runtime) CopiedPaths(r *manifest.Resolved) []string {
	var out []string
	if rt.projectMode(r) == "copy" {
		out = append(out, r.ProjectDir)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Copies)) {
		if c := r.Copies[name]; c.Enabled && c.Source != "" {
			out = append(out, c.Source)
		}
	}
	return out
}
