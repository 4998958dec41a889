package control

import (
	"encoding/json"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/manifest"
)

// removeAttempts bounds the tries of one removal before the reaper takes it
// over (it retries sandboxes stuck in deleting); removeBackoff is the first wait
// between two, doubled each time.
const (
	removeAttempts = 5
	removeBackoff  = 200 * time.Millisecond
)

// Delete stops and removes a sandbox: deleting, then deleted.
func (s *Service) Delete(id string) (Sandbox, error) {
	return s.delete(id, "")
}

func (s *Service) delete(id, reason string) (Sandbox, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return Sandbox{}, err
	}
	if rec.State == store.StateDeleted || rec.State == store.StateDeleting {
		return s.view(rec), nil
	}
	l := s.lives.of(id)
	if rec.ContainerID != "" {
		// A stopped sandbox without services has nothing on its network: the
		// network goes while the stream is read and the containers removed.
		rt := s.rtOf(id)
		var plan manifest.Manifest
		if json.Unmarshal(rec.Plan, &plan) == nil && len(plan.Services) == 0 && !rt.Running(s.ctx, rec.ContainerID) {
			done := make(chan struct{})
			s.lives.setFlags(l, func() { l.netRemoval = done })
			go func() { defer close(done); _ = rt.RemoveNetworks(s.ctx, id) }()
		}
		// What the supervisor reported so far comes before the deletion.
		s.status.catchUp(id, l)
	}
	ev, err := s.events.emit(id, store.Event{Kind: "sandbox.deleting", Reason: reason}, store.StateDeleting)
	if err != nil {
		return Sandbox{}, err
	}
	rec.State, rec.LastSeq = ev.State, ev.Sequence
	s.goAsync(func() { s.finishDelete(id, reason) })
	return s.view(rec), nil
}

func (s *Service) finishDelete(id, reason string) {
	l := s.lives.of(id)
	if !s.lives.claim(&l.deleting) {
		return
	}
	defer s.lives.setFlags(l, func() { l.deleting = false })
	s.lives.interrupt(l)
	l.mu.Lock()
	defer l.mu.Unlock()
	s.lives.setFlags(l, func() { l.stopping = "deleted" })
	removeStart := time.Now()
	s.mu.Lock()
	early := l.netRemoval
	l.netRemoval = nil
	s.mu.Unlock()
	if early != nil {
		// The network is being removed already: the containers first, then
		// whatever is left.
		_ = s.rtOf(id).RemoveContainers(s.ctx, id)
		<-early
	}
	// A removal can race the Engine's own work (a create being undone, a
	// container still stopping): try again a few times before leaving it to the
	// reaper, which retries sandboxes stuck in deleting.
	attempt := 0
	err := backoff.RetryNotify(func() error {
		attempt++
		return s.rtOf(id).Remove(s.ctx, id)
	}, backoff.WithContext(backoff.WithMaxRetries(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(removeBackoff), backoff.WithMultiplier(2), backoff.WithRandomizationFactor(0),
		backoff.WithMaxElapsedTime(0)), removeAttempts-1), s.ctx),
		func(err error, _ time.Duration) {
			s.log.Warn("cannot remove", "sandbox", id, "attempt", attempt, "error", err.Error())
		})
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("cannot remove", "sandbox", id, "attempt", attempt, "error", err.Error())
		}
		return
	}
	s.status.awaitEgress(l) // the proxy is gone: its last denials are counted
	s.status.flushCounts(id, l, true)
	s.recordStep(id, "remove", time.Since(removeStart))
	s.events.emit(id, store.Event{Kind: "sandbox.deleted", Reason: reason, Extra: s.lives.takeSteps(l)}, store.StateDeleted)
	s.holdSecrets(l, nil)
	s.mu.Lock()
	delete(s.lives.m, id)
	delete(s.lives.active, id)
	s.mu.Unlock()
}
