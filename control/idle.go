package control

import "time"

// idle reports whether no client is attached, no exec runs, and nothing used the
// sandbox for idle_ttl.
func (rp *reaper) idle(id string) bool {
	if rp.idleTTL <= 0 {
		return false
	}
	return idleFor(rp.lives, id, rp.idleTTL)
}

// idleFor reports whether no client is attached to sandbox id, no exec runs in
// it, and nothing used it for ttl (a sandbox with no idle clock yet gets one
// now).
func idleFor(ls *lives, id string, ttl time.Duration) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.attached[id] > 0 {
		return false
	}
	if l, ok := ls.m[id]; ok && l.execs > 0 {
		return false
	}
	last, ok := ls.active[id]
	if !ok {
		ls.active[id] = time.Now()
		return false
	}
	return time.Since(last) > ttl
}
