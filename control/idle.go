package control

import "time"

// idle reports whether no client is attached, no exec runs, and nothing used the
// sandbox for idle_ttl.
func (rp *reaper) idle(id string) bool {
	if rp.idleTTL <= 0 {
		return false
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.attached[id] > 0 {
		return false
	}
	if l, ok := rp.live[id]; ok && l.execs > 0 {
		return false
	}
	last, ok := rp.active[id]
	if !ok {
		rp.active[id] = time.Now()
		return false
	}
	return time.Since(last) > rp.idleTTL
}
