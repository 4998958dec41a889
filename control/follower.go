package control

import (
	"context"
	"log/slog"
	"sync"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
)

// follower turns what comes from a running sandbox into its events: the
// supervisor's status stream (status.go), within the bounds of what a sandbox
// can make the daemon record (bounds.go), the egress proxy's denials
// (egress.go), and the end of its primary (watch.go, earlyexit.go).
//
// It sees of the daemon only these fields: the store, the lock of the live
// sandboxes' shared fields, and the few operations it calls.
type follower struct {
	store *store.Store
	// mu is the daemon's lock of the live sandboxes (Service.mu): it guards the
	// fields of live marked so.
	mu      *sync.Mutex
	ctx     func() context.Context // the daemon's, ended when it stops
	log     func() *slog.Logger
	goAsync func(f func()) // runs f in the background; the daemon's stop waits for it
	liveOf  func(id string) *live
	rtOf    func(id string) backend.Backend
	// recordID is the record's ID of a sandbox the backend names (alias.go).
	recordID func(id string) (string, bool)
	// emit appends an event (events.emit); emitIfOpen only while the
	// sandbox's run is open (phase.go).
	emit       func(id string, ev store.Event, state string) (store.Event, error)
	emitIfOpen func(id string, ev store.Event, state string) bool
	setFlags   func(l *live, f func())
	claim      func(flag *bool) bool
	touch      func(id string)
	// stopFailed, markStopped and delete end a sandbox the stream or its
	// primary reported failed or stopped (stop.go, delete.go).
	stopFailed  func(id string)
	markStopped func(id, reason string, exitCode *int)
	delete      func(id, reason string) (Sandbox, error)
}

// newFollower returns the follower of s's sandboxes.
func newFollower(s *Service) *follower {
	return &follower{
		store:       s.store,
		mu:          &s.mu,
		ctx:         func() context.Context { return s.ctx },
		log:         func() *slog.Logger { return s.log },
		goAsync:     s.goAsync,
		liveOf:      s.lives.of,
		rtOf:        s.rtOf,
		recordID:    s.recordID,
		emit:        s.events.emit,
		emitIfOpen:  s.events.emitIfOpen,
		setFlags:    s.lives.setFlags,
		claim:       s.lives.claim,
		touch:       s.lives.touch,
		stopFailed:  s.stopFailed,
		markStopped: s.markStopped,
		delete:      s.delete,
	}
}
