package pool

import (
	"context"
	"slices"
	"time"

	"github.com/airlock-dev/airlock/backend"
)

// removeLocked takes m out of p and removes its objects in the background
// (ps.mu held).
func (ps *Pools) removeLocked(p *Pool, m *Member) {
	if i := slices.Index(p.members, m); i >= 0 {
		p.members = slices.Delete(p.members, i, i+1)
		ps.total--
	}
	if m.cancel != nil {
		m.cancel()
	}
	delete(ps.early, m.sb.ID)
	ps.removals.Add(1)
	go func() {
		defer ps.removals.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ps.ctx()), 2*time.Minute)
		defer cancel()
		ps.removeRetrying(ctx, p.rt, m.sb.ID)
	}()
}

// removeRetrying removes a pooled sandbox, trying again while the Engine
// fails (a parked one found stopped because the Engine restarts is removed
// while the Engine is still down) until ctx ends: no daemon would remove it
// later (RemoveLeftovers runs at start only).
func (ps *Pools) removeRetrying(ctx context.Context, rt Backend, id string) {
	wait := 250 * time.Millisecond
	for {
		err := rt.Remove(ctx, id)
		if err == nil {
			return
		}
		if !sleep(ctx, wait) {
			ps.log().Warn("cannot remove a pooled sandbox", "sandbox", id, "error", err.Error())
			return
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// removeMembersLocked removes every parked sandbox of p (ps.mu held).
func (ps *Pools) removeMembersLocked(p *Pool) int {
	n := len(p.members)
	for _, m := range slices.Clone(p.members) {
		ps.removeLocked(p, m)
	}
	return n
}

// DrainIdle drains the pools no run used for their idle_ttl (the reaper's tick).
func (ps *Pools) DrainIdle() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.byID {
		if p.idleTTL > 0 && len(p.members) > 0 && time.Since(p.lastUsed) > p.idleTTL {
			ps.log().Info("draining an idle warm pool", "project", p.project, "idle_ttl", p.idleTTL.String())
			ps.removeMembersLocked(p)
			p.warmSize = 0
		}
	}
}

// Drain removes the parked sandboxes of the pools that match (every pool when
// project is ""), and those being made, waits for their removal, and returns
// how many it removed. The pools stay empty until a run or a warm of their
// manifest sizes them again.
func (ps *Pools) Drain(ctx context.Context, project string) int {
	return ps.empty(ctx, func(p *Pool) bool { return project == "" || p.project == project })
}

// empty drains the pools that match; see Drain.
func (ps *Pools) empty(ctx context.Context, match func(*Pool) bool) int {
	n := 0
	for {
		ps.mu.Lock()
		var busy []chan struct{}
		for _, p := range ps.byID {
			if !match(p) {
				continue
			}
			p.size, p.warmSize = 0, 0
			n += ps.removeMembersLocked(p)
			if p.inflight > 0 {
				busy = append(busy, p.wake)
			}
		}
		ps.mu.Unlock()
		if len(busy) == 0 {
			break
		}
		// A sandbox being made joins its pool when done: removed next round.
		select {
		case <-busy[0]:
		case <-ctx.Done():
			return n
		}
	}
	done := make(chan struct{})
	go func() { ps.removals.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return n
}

// Parked is a parked sandbox as prune lists it.
type Parked struct{ ID, Project, Engine string }

// Parked lists the parked sandboxes of every pool.
func (ps *Pools) Parked() []Parked {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []Parked
	for _, p := range ps.byID {
		for _, m := range p.members {
			out = append(out, Parked{m.sb.ID, p.project, p.endpoint.String()})
		}
	}
	return out
}

// Close stops filling, removes every parked sandbox and waits for it.
func (ps *Pools) Close(ctx context.Context) {
	ps.mu.Lock()
	ps.closed = true
	ps.mu.Unlock()
	ps.empty(ctx, func(*Pool) bool { return true })
}

// RemoveLeftovers removes the pooled sandboxes of this daemon's that no pool
// holds and no run claimed: what a daemon that went away left parked.
func (ps *Pools) RemoveLeftovers(ctx context.Context, rt Backend) {
	list, err := rt.List(ctx, map[string]string{backend.LabelKind: backend.KindRun}, true)
	if err != nil {
		return
	}
	for _, in := range list {
		if in.Pool == "" {
			continue
		}
		if ps.host.Claimed(in.ID) {
			continue // claimed: a sandbox of the store, handled as such
		}
		ps.log().Info("removing a pooled sandbox left by an earlier daemon", "sandbox", in.ID)
		_ = rt.Remove(ctx, in.ID)
	}
}
