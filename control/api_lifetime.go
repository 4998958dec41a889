package control

import (
	"math"
	"net/http"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
)

// update changes a sandbox's lifetime: PATCH /v1/sandboxes/{id}.
func (s *server) update(w http.ResponseWriter, r *http.Request) {
	var req client.UpdateRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	u, err := lifetimeUpdateFromWire(&req)
	if err != nil {
		writeError(w, err)
		return
	}
	sb, err := s.svc.UpdateLifetime(r.PathValue("id"), u)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toClientSandbox(sb))
}

// seconds reads the API's seconds (a JSON number) as a duration, rounded to
// the millisecond; field names it in the error.
func seconds(field string, v float64) (time.Duration, error) {
	if math.IsNaN(v) || v < 0 || v > maxLifetime.Seconds() {
		return 0, errorf(ErrInvalidRequest, "%s: must be a number of seconds between 0 and %d (a year), not %g", field, int64(maxLifetime.Seconds()), v)
	}
	return time.Duration(math.Round(v*1000)) * time.Millisecond, nil
}

// lifetimeFromWire is the lifetime of an API create request.
func lifetimeFromWire(req client.LifetimeRequest) (LifetimeRequest, error) {
	out := LifetimeRequest{OnTimeout: req.OnTimeout, OnIdle: req.OnIdle}
	var err error
	if out.Timeout, err = seconds("timeout", req.Timeout); err != nil {
		return LifetimeRequest{}, err
	}
	if out.IdleTimeout, err = seconds("idle_timeout", req.IdleTimeout); err != nil {
		return LifetimeRequest{}, err
	}
	return out, nil
}

// lifetimeUpdateFromWire is the change of an API update request.
func lifetimeUpdateFromWire(req *client.UpdateRequest) (LifetimeUpdate, error) {
	if req.Timeout == nil && req.OnTimeout == nil && req.IdleTimeout == nil && req.OnIdle == nil {
		return LifetimeUpdate{}, errorf(ErrInvalidRequest, "nothing to change: give timeout, on_timeout, idle_timeout or on_idle")
	}
	out := LifetimeUpdate{OnTimeout: req.OnTimeout, OnIdle: req.OnIdle}
	if req.Timeout != nil {
		d, err := seconds("timeout", *req.Timeout)
		if err != nil {
			return LifetimeUpdate{}, err
		}
		out.Timeout = &d
	}
	if req.IdleTimeout != nil {
		d, err := seconds("idle_timeout", *req.IdleTimeout)
		if err != nil {
			return LifetimeUpdate{}, err
		}
		out.IdleTimeout = &d
	}
	return out, nil
}

// wireLifetime is the API's view of a record's lifetime.
func wireLifetime(lt store.Lifetime) client.Lifetime {
	var out client.Lifetime
	if !lt.ExpiresAt.IsZero() {
		at := lt.ExpiresAt
		out.ExpiresAt, out.OnTimeout = &at, orDelete(lt.OnTimeout)
	}
	if lt.IdleTimeout > 0 {
		out.IdleTimeout, out.OnIdle = lt.IdleTimeout.Seconds(), orDelete(lt.OnIdle)
	}
	return out
}
