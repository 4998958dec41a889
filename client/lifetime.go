package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// What happens to a sandbox when its deadline passes or it was idle for its
// idle timeout: OnExpiryDelete (the default) removes it, OnExpiryStop stops
// it (its files stay; it can be resumed).
const (
	OnExpiryDelete = "delete"
	OnExpiryStop   = "stop"
)

// LifetimeRequest is the lifetime a create request may give its sandbox.
// Durations are seconds (a JSON number; fractions are rounded to the
// millisecond).
type LifetimeRequest struct {
	// Timeout: the sandbox expires this many seconds after it was accepted
	// (0: never).
	Timeout float64 `json:"timeout,omitempty"`
	// OnTimeout is OnExpiryDelete (default) or OnExpiryStop.
	OnTimeout string `json:"on_timeout,omitempty"`
	// IdleTimeout: the sandbox expires once it was ready and idle (no
	// attached client, no exec running, no use) this many seconds; it
	// replaces the daemon's runtime.idle_ttl for it (0: the daemon's).
	IdleTimeout float64 `json:"idle_timeout,omitempty"`
	// OnIdle is OnExpiryDelete (default), OnExpiryStop or OnExpiryPause.
	OnIdle string `json:"on_idle,omitempty"`
}

// Lifetime is the lifetime of a sandbox as its record shows it.
type Lifetime struct {
	// ExpiresAt is its deadline, nil when it has none.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// OnTimeout is what happens then (with ExpiresAt).
	OnTimeout string `json:"on_timeout,omitempty"`
	// IdleTimeout, in seconds, is its own idle timeout (0: the daemon's
	// runtime.idle_ttl, which stops an idle up sandbox).
	IdleTimeout float64 `json:"idle_timeout,omitempty"`
	// OnIdle is what happens once it was idle that long (with IdleTimeout).
	OnIdle string `json:"on_idle,omitempty"`
}

// UpdateRequest changes a sandbox's lifetime (PATCH /v1/sandboxes/{id}); a
// field left nil is left as it is.
type UpdateRequest struct {
	// Timeout: the sandbox expires this many seconds from now; 0 clears its
	// deadline.
	Timeout *float64 `json:"timeout,omitempty"`
	// OnTimeout is OnExpiryDelete or OnExpiryStop (set with a timeout, or
	// alone for the deadline it has).
	OnTimeout *string `json:"on_timeout,omitempty"`
	// IdleTimeout in seconds; 0 clears it (the daemon's idle_ttl applies again).
	IdleTimeout *float64 `json:"idle_timeout,omitempty"`
	// OnIdle is OnExpiryDelete, OnExpiryStop or OnExpiryPause.
	OnIdle *string `json:"on_idle,omitempty"`
}

// Update changes a sandbox's lifetime and returns its record.
func (c *Client) Update(ctx context.Context, id string, req *UpdateRequest) (*Sandbox, error) {
	var sb Sandbox
	return &sb, c.do(ctx, http.MethodPatch, "/v1/sandboxes/"+url.PathEscape(id), req, &sb)
}

// SetTimeout gives a sandbox a deadline d from now (0 clears it), keeping its
// policy (onTimeout "" keeps the one it has, else OnExpiryDelete).
func (c *Client) SetTimeout(ctx context.Context, id string, d time.Duration, onTimeout string) (*Sandbox, error) {
	secs := d.Seconds()
	req := &UpdateRequest{Timeout: &secs}
	if onTimeout != "" {
		req.OnTimeout = &onTimeout
	}
	return c.Update(ctx, id, req)
}
