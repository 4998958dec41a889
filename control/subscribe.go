package control

import (
	"sync"

	"github.com/airlock-dev/airlock/control/store"
)

// Subscribe returns the events of sandbox id after from and, with follow, a
// channel of the live ones, closed when the subscriber fell behind or the daemon
// stops; cancel ends the subscription.
func (s *Service) Subscribe(id string, from uint64, follow bool) (backlog []store.Event, live <-chan store.Event, cancel func(), err error) {
	if !follow {
		evs, err := s.store.Events(id, from)
		if err != nil {
			return nil, nil, nil, err
		}
		return evs, nil, func() {}, nil
	}
	backlog, in, stop, err := s.store.Subscribe(id, from)
	if err != nil {
		return nil, nil, nil, err
	}
	out := make(chan store.Event, 16)
	done := make(chan struct{})
	go func() {
		defer close(out)
		for {
			select {
			case e, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- e:
				case <-done:
					return
				}
			case <-done:
				return
			case <-s.ctx.Done():
				return
			}
		}
	}()
	var once sync.Once
	return backlog, out, func() { once.Do(func() { close(done); stop() }) }, nil
}
