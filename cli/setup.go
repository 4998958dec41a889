package cli

import (
	"context"
	"os"
	"os/signal"
	"sync"
)

// setup guards the setup phase of run and up: a signal during it cancels ctx and
// is remembered, so the command removes what it made and exits 130 (128+N for
// another signal). After end, signals stay on sigs for the caller to forward.
type setup struct {
	ctx    context.Context
	cancel context.CancelFunc
	sigs   chan os.Signal
	done   chan struct{}
	end    func()

	mu  sync.Mutex
	sig os.Signal
}

func newSetup(parent context.Context) *setup {
	s := &setup{sigs: make(chan os.Signal, 4), done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(parent)
	s.end = sync.OnceFunc(func() { close(s.done) })
	signal.Notify(s.sigs, forwardedSignals...)
	go func() {
		select {
		case sig := <-s.sigs:
			s.mu.Lock()
			s.sig = sig
			s.mu.Unlock()
			s.cancel()
		case <-s.done:
		}
	}()
	return s
}

// interrupted returns the signal that interrupted the setup, or nil.
func (s *setup) interrupted() os.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sig
}

// err returns the interruption's error when there was one, else err.
func (s *setup) err(err error) error {
	if sig := s.interrupted(); sig != nil {
		return interruptedDuringSetup(sig)
	}
	return err
}

// close ends the setup and stops catching signals.
func (s *setup) close() {
	s.end()
	signal.Stop(s.sigs)
	s.cancel()
}
