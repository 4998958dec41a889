package control

import "time"

// idle reports whether no client is attached, no exec runs, and nothing used the
// sandbox for idle_ttl.
func (rp *reaper) idle(id string) bool {
	if rp.idleTTL <= 0 {
		return false
	}
	rp.lives.mu.Lock()
	defer rp.lives.mu.Unlock()
	if rp.lives.attached[id] > 0 {
		return false
	}
	if l, ok := rp.lives.m[id]; ok && l.execs > 0 {
		return false
	}
	last, ok := rp.lives.active[id]
	if !ok {
		rp.lives.active[id] = time.Now()
		return false
	}
	return time.Since(last) > rp.idleTTL
}
