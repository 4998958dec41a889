package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/manifest"
)

// fillLocked starts p's filler when it is short and none runs (ps.mu held).
func (ps *Pools) fillLocked(p *Pool) {
	if p.filling || ps.closed || p.key == "" || len(p.members)+p.inflight >= p.target() {
		return
	}
	p.filling = true
	ps.wg.Add(1)
	go func() {
		defer ps.wg.Done()
		ps.fill(p)
	}()
}

// roomLocked says whether p may make one more sandbox under runtime.pool_max:
// a refill never takes the last free place, which is kept for a pool that has
// none (ps.mu held).
func (ps *Pools) roomLocked(p *Pool) bool {
	free := ps.host.Max - ps.total
	if len(p.members)+p.inflight == 0 {
		return free >= 1
	}
	return free >= 2
}

// fill starts the making of p's sandboxes until it holds, or makes, its
// target: several at once (each under runtime.pool_max, roomLocked), so that
// runs back to back find one parked. It waits for the cold start of a run
// that missed, for refillDelay after a claim, and backs off after failures;
// each sandbox made (made) starts it again when the pool is still short.
func (ps *Pools) fill(p *Pool) {
	for {
		ps.mu.Lock()
		if ps.closed || len(p.members)+p.inflight >= p.target() || !ps.roomLocked(p) || p.key == "" {
			p.filling = false
			ps.notifyLocked(p)
			ps.mu.Unlock()
			return
		}
		if p.cold > 0 && time.Since(p.lastClaim) < coldHoldMax {
			// A run that missed is starting cold: after it (ColdStarted).
			wake, until := p.wake, p.lastClaim.Add(coldHoldMax)
			ps.mu.Unlock()
			if !sleepOr(ps.ctx(), time.Until(until), wake) {
				ps.mu.Lock()
				p.filling = false
				ps.mu.Unlock()
				return
			}
			continue
		}
		if wait := max(time.Until(p.retryAt), time.Until(p.refillAt)); wait > 0 {
			ps.mu.Unlock()
			if !sleep(ps.ctx(), wait) {
				ps.mu.Lock()
				p.filling = false
				ps.mu.Unlock()
				return
			}
			continue
		}
		key, r := p.key, p.resolved
		p.inflight++
		ps.total++
		began := time.Now()
		p.makeStarts = append(p.makeStarts, began)
		ps.wg.Add(1)
		go func() {
			defer ps.wg.Done()
			m, err := ps.make(p, key, r)
			ps.made(p, key, m, err, began)
		}()
		ps.mu.Unlock()
	}
}

// made records the end of the making of one sandbox of p (of key), begun at
// began: parked (m), failed (err: the pool backs off), or of a key the pool
// left.
func (ps *Pools) made(p *Pool, key string, m *Member, err error, began time.Time) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p.inflight--
	if i := slices.Index(p.makeStarts, began); i >= 0 {
		p.makeStarts = slices.Delete(p.makeStarts, i, i+1)
	}
	if err == nil {
		p.makeTook = time.Since(began)
	}
	switch {
	case err != nil:
		ps.total--
		p.failures++
		p.lastError = err.Error()
		if time.Now().After(p.retryAt) {
			// Sandboxes made together that fail together back off once.
			p.backoff = min(max(2*p.backoff, time.Second), poolRetryMax)
			p.retryAt = time.Now().Add(p.backoff)
		}
		ps.log().Warn("cannot fill a warm pool", "project", p.project, "error", err.Error(), "retry_in", p.backoff.String())
	case key != p.key || ps.closed:
		// The pool moved on (or closed) while it was made.
		ps.total--
		p.stale++
		ps.removeLocked(p, m)
	default:
		p.backoff, p.retryAt = 0, time.Time{}
		p.members = append(p.members, m)
	}
	ps.notifyLocked(p)
	ps.fillLocked(p)
}

// make creates, starts and parks one sandbox of p.
func (ps *Pools) make(p *Pool, key string, r *manifest.Resolved) (*Member, error) {
	ready, _ := backend.ReadyTimeout(r) // validated when the pool was made
	ctx, cancel := context.WithTimeout(ps.ctx(), ready+2*time.Minute)
	defer cancel()
	id := ids.New()
	sb, err := p.rt.Create(ctx, &backend.Request{ID: id, Manifest: r, Kind: backend.KindRun, Park: true, PoolKey: key})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Member, error) {
		_ = p.rt.Remove(context.WithoutCancel(ctx), id)
		return nil, err
	}
	if err := p.rt.Start(ctx, sb); err != nil {
		return fail(err)
	}
	m := &Member{sb: sb, since: time.Now(), healthy: true}
	parked := make(chan error, 1)
	wctx, wcancel := context.WithCancel(ps.ctx())
	m.cancel = wcancel
	ps.wg.Add(1)
	go func() {
		defer ps.wg.Done()
		err := p.rt.WatchParked(wctx, sb, func() { parked <- nil })
		if err == nil {
			err = errors.New("its status stream ended")
		}
		select {
		case parked <- err:
		default:
		}
		if wctx.Err() == nil {
			// It became unhealthy while parked: removed, and replaced.
			ps.unhealthy(p, m, err)
		}
	}()
	select {
	case err := <-parked:
		if err != nil {
			wcancel()
			return fail(err)
		}
	case <-ctx.Done():
		wcancel()
		return fail(fmt.Errorf("the pooled sandbox did not park: %w", ctx.Err()))
	}
	m.ready = true
	return m, nil
}

// unhealthy drops a parked member whose health watch ended.
func (ps *Pools) unhealthy(p *Pool, m *Member, err error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	i := slices.Index(p.members, m)
	if i < 0 {
		return
	}
	reason := "it stopped"
	if err != nil {
		reason = err.Error()
	}
	ps.log().Info("removing an unhealthy parked sandbox", "sandbox", m.sb.ID, "project", p.project, "reason", reason)
	p.failures++
	p.lastError = reason
	ps.removeLocked(p, m)
	ps.fillLocked(p)
}
