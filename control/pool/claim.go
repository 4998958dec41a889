package pool

import (
	"context"
	"slices"
	"time"

	"github.com/airlock-dev/airlock/manifest"
)

// Want is a run's wish for a pooled sandbox, as the daemon checked it.
type Want struct {
	Backend  Backend            // where the run's sandbox goes
	Resolved *manifest.Resolved // its manifest
	File     string             // the manifest's file (with the project and Engine, it names the pool)
	Values   map[string]string  // the manifest's substituted values
	// Configured says the manifest has a pool ([sandbox.pool] size); Reason,
	// when not "", is why this run cannot take a parked sandbox (a Miss*).
	Configured bool
	Reason     string
}

// Take hands a run a parked sandbox of its manifest's pool, or says why
// not; a miss of a manifest with a pool also starts filling it. The returned
// reason is "" for a hit, "none" when there is no pool and none is wanted (a
// miss of a manifest without a pool is not counted).
func (ps *Pools) Take(ctx context.Context, w Want) (m *Member, p *Pool, reason string) {
	configured, reason := w.Configured, w.Reason
	rt, r := w.Backend, w.Resolved
	ident := poolIdent(rt.Location(), r, w.File)
	ps.mu.Lock()
	p = ps.byID[ident]
	ps.mu.Unlock()
	if p == nil && !configured {
		return nil, nil, "none" // no pool, none wanted
	}
	if reason == "" && ps.host.Max <= 0 {
		reason = MissDisabled
	}
	if reason != "" {
		if p != nil {
			ps.miss(p, reason)
		}
		return nil, p, reason
	}
	key, err := ps.Key(ctx, rt, r, w.Values)
	if err != nil {
		ps.log().Info("a run cannot use a warm pool", "project", r.ProjectDir, "error", err.Error())
		return nil, p, MissOptions
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil, nil, MissDisabled
	}
	p = ps.poolLocked(ident, r, w.File, rt)
	if p.key != key {
		if p.key != "" {
			reason = MissStale
			p.stale += len(p.members)
			ps.removeMembersLocked(p)
		}
		p.key, p.resolved = key, r
		p.failures, p.lastError, p.backoff, p.retryAt = 0, "", 0, time.Time{}
	}
	var waitUntil time.Time
	for reason == "" {
		i := slices.IndexFunc(p.members, func(m *Member) bool { return m.ready && m.healthy })
		if i < 0 && waitUntil.IsZero() {
			waitUntil = p.dueLocked(time.Now())
		}
		if i < 0 && time.Now().Before(waitUntil) {
			// One being made parks sooner than a cold start would be made:
			// wait for it (each change of the pool wakes this).
			wake := p.wake
			ps.mu.Unlock()
			woken := sleepOr(ctx, time.Until(waitUntil), wake)
			ps.mu.Lock()
			if ps.closed {
				return nil, nil, MissDisabled
			}
			if p.key != key || (!woken && ctx.Err() != nil) {
				waitUntil = time.Time{}
				reason = MissEmpty
				break
			}
			continue
		}
		if i < 0 {
			reason = MissEmpty
			if slices.ContainsFunc(p.members, func(m *Member) bool { return m.ready && !m.healthy }) {
				reason = MissUnhealthy
			}
			break
		}
		m = p.members[i]
		p.members = slices.Delete(p.members, i, i+1)
		ps.total--
		if m.cancel != nil {
			m.cancel()
		}
		if !rt.Running(ctx, m.sb.PrimaryID) {
			// Never handed out: removed and replaced.
			ps.removeLocked(p, m)
			m = nil
			continue
		}
		p.hits++
		p.lastClaim = time.Now()
		p.delayRefillLocked()
		ps.fillLocked(p)
		return m, p, ""
	}
	p.misses[reason]++
	p.resolved = r
	p.lastClaim = time.Now() // the cold start too goes first
	p.delayRefillLocked()
	p.cold++
	ps.fillLocked(p)
	return nil, p, reason
}

// dueLocked is until when a create that finds p empty at now waits for a
// sandbox being made: while the one begun first may still park sooner than a
// cold start begun now would (both take about as long as the last one made
// took, and longer when the host is busy: twice that from its begin, and never
// less than a cold start's time from now, since a create may come long after
// the refill began). The zero time when none is being made or none was made
// yet (ps.mu held).
func (p *Pool) dueLocked(now time.Time) time.Time {
	if len(p.makeStarts) == 0 || p.makeTook <= 0 {
		return time.Time{}
	}
	due := p.makeStarts[0].Add(2 * p.makeTook)
	if cold := now.Add(p.makeTook); due.Before(cold) {
		return cold
	}
	return due
}

// ColdMiss says whether a miss of Take left its run to a cold start the pool
// waits for (ColdStarted): the misses counted after a pool's key was checked.
func ColdMiss(reason string) bool {
	return reason == MissEmpty || reason == MissStale || reason == MissUnhealthy
}

// ColdStarted tells p that a run which missed it (ColdMiss) has started its
// sandbox, or failed to: its refill may begin refillDelay later.
func (ps *Pools) ColdStarted(p *Pool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p.cold > 0 {
		p.cold--
	}
	p.lastClaim = time.Now()
	p.delayRefillLocked()
	ps.notifyLocked(p)
}

// delayRefillLocked makes p's refill wait refillDelay from now, unless a wait
// is pending already: a claim right after another does not push the refill
// back (ps.mu held).
func (p *Pool) delayRefillLocked() {
	if now := time.Now(); !p.refillAt.After(now) {
		p.refillAt = now.Add(refillDelay)
	}
}

// Discard removes a parked sandbox a run took but could not use.
func (ps *Pools) Discard(p *Pool, m *Member) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.removeLocked(p, m)
}

// poolLocked returns the pool ident names (made when missing), sized by r's
// [sandbox.pool] and marked used now (ps.mu held).
func (ps *Pools) poolLocked(ident string, r *manifest.Resolved, file string, rt Backend) *Pool {
	p := ps.byID[ident]
	if p == nil {
		p = &Pool{ident: ident, project: r.ProjectDir, file: file, rt: rt, endpoint: rt.Location(),
			misses: map[string]int{}, wake: make(chan struct{})}
		p.idleTTL, _ = time.ParseDuration(manifest.DefaultPoolIdleTTL)
		ps.byID[ident] = p
	}
	if r.Sandbox.Pool != nil {
		p.size = r.Sandbox.Pool.Size
		p.idleTTL, _ = time.ParseDuration(r.Sandbox.Pool.IdleTTL)
	}
	p.lastUsed = time.Now()
	return p
}

// miss counts a miss of p.
func (ps *Pools) miss(p *Pool, reason string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p.misses[reason]++
}
