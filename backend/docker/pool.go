package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// Claim hands a parked sandbox (made with Request.Park and started) to a run:
// its supervisor reads the claim — the main command, its env and cwd, and the
// values of the run's manifest — from the first line of its stdin, through
// the attach to the main command (one is made when no client attached), and
// then starts the daemons that waited for values and the main command. The
// client's stdin, when it forwards one, follows the claim. A supervisor that
// finds a daemon unhealthy ends the run with 125 and says why.
func (rt *Runtime) Claim(ctx context.Context, sb *backend.Sandbox, c backend.Claim) error {
	if c.Manifest == nil {
		c.Manifest = ownState(sb).manifest
	}
	payload, err := backend.ClaimDelivery(c)
	if err != nil {
		return err
	}
	line, err := json.Marshal(payload)
	if err != nil {
		return failed("cannot encode the claim")
	}
	defer rt.step(sb.ID, "claim")()
	ownState(sb).claimMu.Lock()
	conn, in := ownState(sb).claimConn, ownState(sb).claimStdin
	ownState(sb).claimConn, ownState(sb).claimStdin = nil, nil
	ownState(sb).claimMu.Unlock()
	own := conn == nil
	if own {
		resp, err := rt.Engine.ContainerAttach(ctx, sb.PrimaryID, container.AttachOptions{Stream: true, Stdin: true})
		if err != nil {
			if !rt.Running(ctx, sb.PrimaryID) {
				return fmt.Errorf("%w: its container is not running", backend.ErrUnhealthy)
			}
			return failed("cannot attach to the parked sandbox: %v", err)
		}
		conn = &resp
	}
	if _, err := conn.Conn.Write(append(line, '\n')); err != nil {
		conn.Close()
		if !rt.Running(ctx, sb.PrimaryID) {
			return fmt.Errorf("%w: its container is not running", backend.ErrUnhealthy)
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
	ownState(sb).manifest, ownState(sb).envSecrets, ownState(sb).parked = c.Manifest, c.EnvSecrets, false
	return nil
}

// WatchParked follows a started pooled sandbox's status stream: parked is
// called once its supervisor parked (services healthy, value-free daemons
// ready). It returns why the sandbox can no longer serve a claim — its
// supervisor failed, a daemon exited or gave up, the container stopped — or
// nil when ctx ends.
func (rt *Runtime) WatchParked(ctx context.Context, sb *backend.Sandbox, parked func()) error {
	return backend.WatchParkedStatus(ctx, rt, sb.PrimaryID, func() {
		// What its claim will want, opened now rather than in the claimer's
		// wait: its command channel and its status stream.
		rt.warm(sb.PrimaryID)
		parked()
	})
}

// CopiedPaths are the host paths whose content a sandbox made from r copies
// in at its creation: the [copies] sources, and the project when it is copied.
// (A warm pool's key fingerprints them.)
func (rt *Runtime) CopiedPaths(r *manifest.Resolved) []string {
	var out []string
	if rt.ProjectCopied(r) {
		out = append(out, r.ProjectDir)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Copies)) {
		if c := r.Copies[name]; c.Enabled && c.Source != "" {
			out = append(out, c.Source)
		}
	}
	return out
}
