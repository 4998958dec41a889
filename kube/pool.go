package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/sandbox"
)

// A warm pool's Pods (docs/pool.md) are made parked (Create with Park): their
// supervisor starts what takes no value and waits for a claim on its socket,
// which Claim delivers with an exec, as Start delivers a held Pod's values.

// WatchParked follows a parked Pod's status until it cannot serve a claim.
func (rt *Runtime) WatchParked(ctx context.Context, sb *sandbox.Sandbox, parked func()) error {
	return sandbox.WatchParkedStatus(ctx, rt, sb.PrimaryID, parked)
}

// Claim delivers a run's claim to a parked Pod's supervisor.
func (rt *Runtime) Claim(ctx context.Context, sb *sandbox.Sandbox, c sandbox.Claim) error {
	values, err := sandbox.ClaimDelivery(c)
	if err != nil {
		return err
	}
	defer rt.step(sb.ID, "claim")()
	if err := sandbox.DeliverValues(ctx, rt, sb.PrimaryID, values); err != nil {
		if strings.Contains(err.Error(), "unhealthy: ") || !rt.Running(ctx, sb.PrimaryID) {
			return fmt.Errorf("%w: %v", sandbox.ErrUnhealthy, err)
		}
		return err
	}
	rt.mu.Lock()
	if st := rt.live[sb.ID]; st != nil {
		st.resolved, st.parked = c.Manifest, false
	}
	rt.mu.Unlock()
	return nil
}

// CopiedPaths are the host paths a Pod of r gets a copy of: the project and
// the [copies] sources (a warm pool's key fingerprints them).
func (rt *Runtime) CopiedPaths(r *manifest.Resolved) []string {
	out := []string{r.ProjectDir}
	for _, name := range slices.Sorted(maps.Keys(r.Copies)) {
		if c := r.Copies[name]; c.Enabled && c.Source != "" {
			out = append(out, c.Source)
		}
	}
	return out
}
