package control

import "time"

// idle reports whether no client is attached, no exec runs, and nothing used the
// sandbox for idle_ttl.
func (s *Service) idle(id string) bool {
	if s.cfg.IdleTTL <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attached[id] > 0 {
		return false
	}
	if l, ok := s.live[id]; ok && l.execs > 0 {
		return false
	}
	last, ok := s.active[id]
	if !ok {
		s.active[id] = time.Now()
		return false
	}
	return time.Since(last) > s.cfg.IdleTTL
}
