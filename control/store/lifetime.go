package store

import "time"

// Lifetime is how long a sandbox may live, kept with its record so that a
// daemon that restarts arms it again: a deadline (ExpiresAt, zero for none)
// and what happens then (OnTimeout), and an idle timeout of its own
// (IdleTimeout, zero for the daemon's runtime.idle_ttl) with what happens once
// it is idle that long (OnIdle). The policies are "delete" or "stop".
type Lifetime struct {
	ExpiresAt   time.Time     `json:"expires_at,omitzero"`
	OnTimeout   string        `json:"on_timeout,omitempty"`
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	OnIdle      string        `json:"on_idle,omitempty"`
}
