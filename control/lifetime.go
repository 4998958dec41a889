package control

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/control/store"
)

// What happens to a sandbox whose deadline passed, or that was idle for its
// own idle timeout.
const (
	expireDelete = "delete"
	expireStop   = "stop"
)

// maxLifetime bounds a timeout and an idle timeout.
const maxLifetime = 365 * 24 * time.Hour

// LifetimeRequest is the lifetime a create gives its sandbox: it expires
// Timeout after it was accepted (0: never), and once ready and idle for
// IdleTimeout (0: the daemon's runtime.idle_ttl applies). The policies are
// "delete" (also when empty) or "stop".
type LifetimeRequest struct {
	Timeout     time.Duration
	OnTimeout   string
	IdleTimeout time.Duration
	OnIdle      string
}

// LifetimeUpdate changes a sandbox's lifetime; a nil field is left as it is.
// Timeout counts from now, and 0 clears the deadline; an IdleTimeout of 0
// clears the sandbox's own.
type LifetimeUpdate struct {
	Timeout     *time.Duration
	OnTimeout   *string
	IdleTimeout *time.Duration
	OnIdle      *string
}

// checkPolicy checks an on_timeout or on_idle value (on_idle may also be
// "pause", pause.go).
func checkPolicy(field, p string) error {
	if field == "on_idle" {
		return checkIdlePolicy(p)
	}
	if p != "" && p != expireDelete && p != expireStop {
		return errorf(ErrInvalidRequest, "%s: must be %q or %q, not %q", field, expireDelete, expireStop, p)
	}
	return nil
}

// checkSpan checks a timeout or idle timeout.
func checkSpan(field string, d time.Duration) error {
	if d < 0 || d > maxLifetime {
		return errorf(ErrInvalidRequest, "%s: must be between 0 and %d seconds (a year), not %g", field, int64(maxLifetime.Seconds()), d.Seconds())
	}
	return nil
}

// checkLifetime checks the lifetime of a create request.
func checkLifetime(lt LifetimeRequest) error {
	if err := checkSpan("timeout", lt.Timeout); err != nil {
		return err
	}
	if err := checkSpan("idle_timeout", lt.IdleTimeout); err != nil {
		return err
	}
	if err := checkPolicy("on_timeout", lt.OnTimeout); err != nil {
		return err
	}
	if err := checkPolicy("on_idle", lt.OnIdle); err != nil {
		return err
	}
	if lt.OnTimeout != "" && lt.Timeout == 0 {
		return errorf(ErrInvalidRequest, "on_timeout: given without a timeout")
	}
	if lt.OnIdle != "" && lt.IdleTimeout == 0 {
		return errorf(ErrInvalidRequest, "on_idle: given without an idle_timeout")
	}
	return nil
}

// record is the lifetime a new sandbox's record keeps, its deadline counted
// from now.
func (lt LifetimeRequest) record(now time.Time) store.Lifetime {
	var out store.Lifetime
	if lt.Timeout > 0 {
		out.ExpiresAt = now.Add(lt.Timeout).UTC()
		out.OnTimeout = orDelete(lt.OnTimeout)
	}
	if lt.IdleTimeout > 0 {
		out.IdleTimeout = lt.IdleTimeout
		out.OnIdle = orDelete(lt.OnIdle)
	}
	return out
}

func orDelete(p string) string {
	if p == "" {
		return expireDelete
	}
	return p
}

// expiry holds the sandboxes' deadlines while the daemon runs, armed from
// their records (at a create, an update, and when the daemon starts), and
// expires each when it passes: sandbox.expired, then the sandbox deleted or
// stopped as its record says. It also expires a sandbox idle for its own idle
// timeout (the reaper asks it). It sees of the daemon only these fields.
type expiry struct {
	store *store.Store
	ctx   func() context.Context // the daemon's, ended when it stops
	log   func() *slog.Logger
	lives *lives
	emit  func(id string, ev store.Event, state string) (store.Event, error)
	stop  func(id, reason string) (Sandbox, error)
	del   func(id, reason string) (Sandbox, error)
	pause func(id, reason string) (Sandbox, error)

	// mu guards deadlines and serialises the changes of a record's lifetime
	// (an update against an expiry of the same sandbox).
	mu        sync.Mutex
	deadlines map[string]time.Time
	wake      chan struct{} // a deadline changed
}

func newExpiry(s *Service) *expiry {
	return &expiry{store: s.store, ctx: func() context.Context { return s.ctx }, log: func() *slog.Logger { return s.log },
		lives: s.lives, emit: s.events.emit, stop: s.Stop, del: s.delete, pause: s.Pause,
		deadlines: map[string]time.Time{}, wake: make(chan struct{}, 1)}
}

// setLocked arms (or, with a zero time, disarms) the deadline of id; x.mu held.
func (x *expiry) setLocked(id string, at time.Time) {
	if at.IsZero() {
		delete(x.deadlines, id)
	} else {
		x.deadlines[id] = at
	}
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// set is setLocked with x.mu taken.
func (x *expiry) set(id string, at time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.setLocked(id, at)
}

// rearm arms the deadlines the store holds: a daemon that restarted keeps
// them (one that passed while no daemon ran expires at once).
func (x *expiry) rearm() {
	recs, err := x.store.List(store.Filter{})
	if err != nil {
		x.log().Error("cannot list sandboxes to arm their deadlines", "error", err.Error())
		return
	}
	for _, rec := range recs {
		if !rec.ExpiresAt.IsZero() && rec.State != store.StateDeleting {
			x.set(rec.ID, rec.ExpiresAt)
		}
	}
}

// run expires the sandboxes whose deadline passed, until the daemon stops.
func (x *expiry) run() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		x.mu.Lock()
		var next time.Time
		for _, at := range x.deadlines {
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		x.mu.Unlock()
		var due <-chan time.Time
		if !next.IsZero() {
			t.Reset(time.Until(next))
			due = t.C
		}
		select {
		case <-x.ctx().Done():
			return
		case <-x.wake:
			continue
		case <-due:
		}
		now := time.Now()
		var ids []string
		x.mu.Lock()
		for id, at := range x.deadlines {
			if !at.After(now) {
				ids = append(ids, id)
				delete(x.deadlines, id)
			}
		}
		x.mu.Unlock()
		for _, id := range ids {
			x.expire(id, now)
		}
	}
}

// expire ends sandbox id if its recorded deadline passed by now: its deadline
// is spent (cleared from the record, so that a sandbox stopped by it and
// resumed lives on), sandbox.expired is recorded, then it is deleted or stopped.
func (x *expiry) expire(id string, now time.Time) {
	x.mu.Lock()
	rec, err := x.store.Get(id)
	if err != nil || rec.ExpiresAt.IsZero() || rec.ExpiresAt.After(now) ||
		rec.State == store.StateDeleting || rec.State == store.StateDeleted {
		x.mu.Unlock()
		return
	}
	at, policy := rec.ExpiresAt, orDelete(rec.OnTimeout)
	_, err = x.store.Update(id, func(r *store.Sandbox) error { r.ExpiresAt, r.OnTimeout = time.Time{}, ""; return nil })
	x.mu.Unlock()
	if err != nil {
		x.log().Warn("cannot clear a deadline that passed", "sandbox", id, "error", err.Error())
	}
	x.log().Info("a sandbox's deadline passed", "sandbox", id, "expires_at", at.Format(time.RFC3339Nano), "policy", policy)
	x.emit(id, store.Event{Kind: "sandbox.expired", Reason: "timeout",
		Extra: map[string]string{"policy": policy, "expires_at": at.Format(time.RFC3339Nano)}}, "")
	x.end(id, policy, "timeout")
}

// idle expires a ready sandbox with an idle timeout of its own once it was
// idle that long (the reaper calls it on each round instead of applying the
// daemon's idle_ttl).
func (x *expiry) idle(rec store.Sandbox) {
	if orDelete(rec.OnIdle) == expirePause && rec.State == store.StatePaused {
		return // paused already: what its idle timeout does is done
	}
	if !idleFor(x.lives, rec.ID, rec.IdleTimeout) {
		return
	}
	// Its idle clock starts again: the next round does not expire it twice
	// while the stop goes on.
	x.lives.touch(rec.ID)
	policy := orDelete(rec.OnIdle)
	x.log().Info("a sandbox was idle for its idle timeout", "sandbox", rec.ID, "idle_timeout", rec.IdleTimeout.String(), "policy", policy)
	x.emit(rec.ID, store.Event{Kind: "sandbox.expired", Reason: "idle_timeout",
		Extra: map[string]string{"policy": policy, "idle_timeout": rec.IdleTimeout.String()}}, "")
	x.end(rec.ID, policy, "idle_timeout")
}

// end deletes, stops or (idle) pauses an expired sandbox.
func (x *expiry) end(id, policy, reason string) {
	var err error
	switch policy {
	case expirePause:
		_, err = x.pause(id, reason)
	case expireStop:
		_, err = x.stop(id, reason)
	default:
		_, err = x.del(id, reason)
	}
	if err != nil {
		x.log().Info("cannot end an expired sandbox", "sandbox", id, "policy", policy, "error", err.Error())
	}
}

// UpdateLifetime changes the deadline or the idle timeout of a sandbox that
// is not being deleted.
func (s *Service) UpdateLifetime(id string, u LifetimeUpdate) (Sandbox, error) {
	if u.Timeout != nil {
		if err := checkSpan("timeout", *u.Timeout); err != nil {
			return Sandbox{}, err
		}
	}
	if u.IdleTimeout != nil {
		if err := checkSpan("idle_timeout", *u.IdleTimeout); err != nil {
			return Sandbox{}, err
		}
	}
	if u.OnTimeout != nil {
		if err := checkPolicy("on_timeout", *u.OnTimeout); err != nil {
			return Sandbox{}, err
		}
	}
	if u.OnIdle != nil {
		if err := checkPolicy("on_idle", *u.OnIdle); err != nil {
			return Sandbox{}, err
		}
		if *u.OnIdle == expirePause {
			if err := s.canPause(s.rtOf(id), id); err != nil {
				return Sandbox{}, err
			}
		}
	}
	x := s.expiry
	x.mu.Lock()
	defer x.mu.Unlock()
	rec, err := s.store.Get(id)
	if err != nil {
		return Sandbox{}, err
	}
	if rec.State == store.StateDeleting || rec.State == store.StateDeleted {
		return Sandbox{}, notIn(id, rec.State, "")
	}
	now := time.Now()
	rec, err = s.store.Update(id, func(r *store.Sandbox) error {
		lt := r.Lifetime
		switch {
		case u.Timeout != nil && *u.Timeout == 0:
			lt.ExpiresAt, lt.OnTimeout = time.Time{}, ""
		case u.Timeout != nil:
			lt.ExpiresAt = now.Add(*u.Timeout).UTC()
			lt.OnTimeout = orDelete(lt.OnTimeout)
		}
		if u.OnTimeout != nil && *u.OnTimeout != "" {
			if lt.ExpiresAt.IsZero() && (u.Timeout == nil || *u.Timeout != 0) {
				return errorf(ErrInvalidRequest, "on_timeout: sandbox %s has no deadline; give a timeout too", id)
			}
			if !lt.ExpiresAt.IsZero() {
				lt.OnTimeout = *u.OnTimeout
			}
		}
		switch {
		case u.IdleTimeout != nil && *u.IdleTimeout == 0:
			lt.IdleTimeout, lt.OnIdle = 0, ""
		case u.IdleTimeout != nil:
			lt.IdleTimeout = *u.IdleTimeout
			lt.OnIdle = orDelete(lt.OnIdle)
		}
		if u.OnIdle != nil && *u.OnIdle != "" {
			if lt.IdleTimeout == 0 && (u.IdleTimeout == nil || *u.IdleTimeout != 0) {
				return errorf(ErrInvalidRequest, "on_idle: sandbox %s has no idle timeout; give an idle_timeout too", id)
			}
			if lt.IdleTimeout != 0 {
				lt.OnIdle = *u.OnIdle
			}
		}
		r.Lifetime = lt
		return nil
	})
	if err != nil {
		return Sandbox{}, unwrapKind(err)
	}
	// The request is a use of the sandbox: its idle clock starts again.
	s.lives.touch(id)
	x.setLocked(id, rec.ExpiresAt)
	if _, err := s.events.emit(id, store.Event{Kind: "sandbox.lifetime_changed", Extra: lifetimeChange(u, rec.Lifetime)}, ""); err != nil {
		s.log.Warn("cannot record a change of a sandbox's lifetime", "sandbox", id, "error", err.Error())
	} else if cur, err := s.store.Get(id); err == nil {
		rec = cur
	}
	return s.view(rec), nil
}

// lifetimeChange is the extra of sandbox.lifetime_changed: changed, the
// fields the update gave (comma-separated, in the API's names) and their
// values (seconds, policies), then the lifetime that results: expires_at (RFC
// 3339) with on_timeout while there is a deadline, idle_timeout (seconds) with
// on_idle while the sandbox has an idle timeout of its own.
func lifetimeChange(u LifetimeUpdate, lt store.Lifetime) map[string]string {
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }
	out := map[string]string{}
	var changed []string
	if u.Timeout != nil {
		changed = append(changed, "timeout")
		out["timeout"] = secs(*u.Timeout)
	}
	if u.OnTimeout != nil {
		changed = append(changed, "on_timeout")
	}
	if u.IdleTimeout != nil {
		changed = append(changed, "idle_timeout")
	}
	if u.OnIdle != nil {
		changed = append(changed, "on_idle")
	}
	out["changed"] = strings.Join(changed, ",")
	if !lt.ExpiresAt.IsZero() {
		out["expires_at"] = lt.ExpiresAt.UTC().Format(time.RFC3339Nano)
		out["on_timeout"] = orDelete(lt.OnTimeout)
	}
	if lt.IdleTimeout > 0 {
		out["idle_timeout"] = secs(lt.IdleTimeout)
		out["on_idle"] = orDelete(lt.OnIdle)
	}
	return out
}

// unwrapKind is the service's own error inside a store error that wraps it
// (the store adds "cannot update the sandbox …: " to what fn returned).
func unwrapKind(err error) error {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke
	}
	return err
}
