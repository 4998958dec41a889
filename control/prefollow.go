package control

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/backend"
)

// A sandbox a create of kind up took from a warm pool is ready as soon as its
// supervisor read the claim (a few milliseconds), and its readiness is read
// from the status stream, which an exec in the sandbox follows: opening that
// exec costs about as much as the claim and the rest of the start together.
// So it is opened while the claim is delivered, and the follower takes it
// (from offset 0, as it would open it then) instead of opening one.

// prefollowUnused is how long an early stream waits for its follower before it
// is closed (a start that failed never follows it).
const prefollowUnused = 30 * time.Second

// prefollowed is a status stream opened before the sandbox's follower needed it.
type prefollowed struct {
	done   chan struct{} // closed once rc and err are set
	rc     io.ReadCloser
	err    error
	cancel context.CancelFunc

	mu    sync.Mutex
	taken bool // the follower took it, or it was closed unused
}

// openEarly starts opening the status stream of sb's primary from its start.
func openEarly(ctx context.Context, rt backend.Backend, containerID string) *prefollowed {
	ctx, cancel := context.WithCancel(ctx)
	p := &prefollowed{done: make(chan struct{}), cancel: cancel}
	go func() {
		p.rc, p.err = rt.FollowStatus(ctx, containerID, 0)
		close(p.done)
	}()
	time.AfterFunc(prefollowUnused, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.taken {
			p.taken = true
			p.close()
		}
	})
	return p
}

// take waits for the stream and hands it over (ok false: it could not be
// opened, or it was closed unused); cancel ends it.
func (p *prefollowed) take() (rc io.ReadCloser, cancel context.CancelFunc, ok bool) {
	p.mu.Lock()
	if p.taken {
		p.mu.Unlock()
		return nil, nil, false
	}
	p.taken = true
	p.mu.Unlock()
	<-p.done
	if p.err != nil {
		p.cancel()
		return nil, nil, false
	}
	return p.rc, p.cancel, true
}

// close ends the stream once it is open.
func (p *prefollowed) close() {
	go func() {
		<-p.done
		if p.rc != nil {
			p.rc.Close()
		}
		p.cancel()
	}()
}

// takeEarly hands the follower of l the stream opened early, when it reads
// from the start (ok false: it opens one itself).
func takeEarly(l *live, from int64) (io.ReadCloser, context.CancelFunc, bool) {
	l.ingestMu.Lock()
	p := l.early
	l.early = nil
	l.ingestMu.Unlock()
	if p == nil {
		return nil, nil, false
	}
	if from != 0 {
		if rc, cancel, ok := p.take(); ok {
			rc.Close()
			cancel()
		}
		return nil, nil, false
	}
	return p.take()
}
