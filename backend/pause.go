package backend

import (
	"context"
	"errors"
)

// Pauser is a backend that can freeze a running sandbox in place and thaw it
// again: every process of its primary (the supervisor, the daemons, execs)
// and of its services' containers stops being scheduled, with its memory
// kept (the Engine's container pause: the cgroup freezer). A backend without
// it (Kubernetes: a Pod cannot be frozen through its API) answers
// ErrNotSupported.
type Pauser interface {
	// Pause freezes sandbox id's containers that run; one already frozen
	// stays so. A failure part way thaws what it froze.
	Pause(ctx context.Context, id string) error
	// Unpause thaws sandbox id's frozen containers; one running stays so.
	Unpause(ctx context.Context, id string) error
}

// ErrNotSupported is what an operation that this backend does not have
// wraps (a pause on Kubernetes).
var ErrNotSupported = errors.New("not supported by this backend")
