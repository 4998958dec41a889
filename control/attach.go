package control

import "time"

// Attach counts a client attached to a sandbox until release is called: the
// idle reaper leaves a sandbox with a client attached alone (idle.go).
func (s *Service) Attach(id string) (release func(), err error) {
	if _, err := s.store.Get(id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.lives.attached[id]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.lives.attached[id]--
		s.lives.active[id] = time.Now()
		s.mu.Unlock()
	}, nil
}
