package pool

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/manifest"
)

// Status describes one pool (airlock pool ls).
type Status struct {
	Key       string
	Project   string
	File      string
	Engine    string
	Size      int
	Ready     int
	Starting  int
	Hits      int
	Misses    map[string]int
	Stale     int
	Failures  int
	LastError string
	IdleTTL   time.Duration
	LastUsed  time.Time
	Sandboxes []Sandbox
}

// Sandbox is one parked sandbox.
type Sandbox struct {
	ID        string
	Container string
	Ready     bool
	Since     time.Time
}

func (ps *Pools) statusLocked(p *Pool) Status {
	st := Status{Key: p.key, Project: p.project, File: p.file, Engine: p.endpoint.String(), Size: p.target(),
		Starting: p.inflight, Hits: p.hits, Misses: maps.Clone(p.misses), Stale: p.stale, Failures: p.failures,
		LastError: p.lastError, IdleTTL: p.idleTTL, LastUsed: p.lastUsed}
	for _, m := range p.members {
		if m.ready && m.healthy {
			st.Ready++
		}
		st.Sandboxes = append(st.Sandboxes, Sandbox{ID: m.sb.ID, Container: m.sb.PrimaryID, Ready: m.ready && m.healthy, Since: m.since})
	}
	return st
}

// List lists the pools, and how many sandboxes they hold together against
// Host.Max.
func (ps *Pools) List() (list []Status, total int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.byID {
		list = append(list, ps.statusLocked(p))
	}
	slices.SortFunc(list, func(a, b Status) int { return strings.Compare(a.Project+a.File, b.Project+b.File) })
	return list, ps.total
}

// Warm fills the pool of r (of file, on rt) to size with sandboxes of key
// (Key) and waits until that many are parked, or the pool cannot fill.
func (ps *Pools) Warm(ctx context.Context, rt Backend, r *manifest.Resolved, file, key string, size int) (Status, error) {
	ident := poolIdent(rt.Location(), r, file)
	ps.mu.Lock()
	p := ps.poolLocked(ident, r, file, rt)
	p.warmSize = size
	if p.key != key {
		p.stale += len(p.members)
		ps.removeMembersLocked(p)
		p.key = key
	}
	p.resolved = r
	p.failures, p.lastError, p.backoff, p.retryAt = 0, "", 0, time.Time{}
	ps.fillLocked(p)
	for {
		ready := 0
		for _, m := range p.members {
			if m.ready && m.healthy {
				ready++
			}
		}
		st := ps.statusLocked(p)
		switch {
		case ready >= size:
			ps.mu.Unlock()
			return st, nil
		case p.failures > 0 && !p.filling && p.inflight == 0:
			ps.mu.Unlock()
			return st, fmt.Errorf("cannot fill the pool: %s", p.lastError)
		case !p.filling && p.inflight == 0 && len(p.members) < size:
			// (What is being made is waited for: the filler ends once
			// it started the last one it may.)
			ps.mu.Unlock()
			return st, fmt.Errorf("cannot fill the pool to %d: runtime.pool_max (%d) is taken by other pools", size, ps.host.Max)
		}
		if p.failures > 0 && p.lastError != "" {
			ps.mu.Unlock()
			return st, fmt.Errorf("cannot fill the pool: %s", p.lastError)
		}
		wake := p.wake
		ps.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return st, ctx.Err()
		}
		ps.mu.Lock()
	}
}
