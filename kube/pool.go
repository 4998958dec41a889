package kube

import (
	"context"
	"errors"

	"github.com/airlock-dev/airlock/sandbox"
)

// errNoPool: the kubernetes backend keeps no warm pool yet (docs/pool.md); the
// daemon never asks it to, so this only guards against a caller that does.
var errNoPool = errors.New("the kubernetes backend has no warm pool")

// WatchParked is not supported on a cluster yet.
func (rt *Runtime) WatchParked(context.Context, *sandbox.Sandbox, func()) error { return errNoPool }

// Claim is not supported on a cluster yet.
func (rt *Runtime) Claim(context.Context, *sandbox.Sandbox, sandbox.Claim) error { return errNoPool }
