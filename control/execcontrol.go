package control

import (
	"context"
	"io"
	"strconv"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/supervisor"
)

// The control of API execs (package execs, control.go): signals, the list,
// the output of a background exec followed.

// Signal sends sig to the processes of one of the sandbox's execs
// (backend.Backend.SignalExec).
func (x execSandbox) Signal(ctx context.Context, sb *backend.Sandbox, execID, sig string) (bool, error) {
	return x.s.rtOf(x.id).SignalExec(ctx, sb.PrimaryID, execID, sig)
}

// SignalExec sends a signal (a name or number) to the process group of a
// running exec of sandbox id, and returns its record.
func (s *Service) SignalExec(id, execID, signal string) (store.Exec, error) {
	sig, err := supervisor.ParseSignal(signal)
	if err != nil {
		return store.Exec{}, errorf(ErrInvalidRequest, "signal: %v", err)
	}
	if err := s.execs.Signal(id, execID, strconv.Itoa(int(sig))); err != nil {
		return store.Exec{}, err
	}
	return s.execs.Get(id, execID)
}

// ListExecs returns the exec records of sandbox id, oldest first (running:
// only those that have not ended; limit > 0: the last limit).
func (s *Service) ListExecs(id string, running bool, limit int) ([]store.Exec, error) {
	return s.execs.List(id, running, limit)
}

// ExecOutput streams an output file of an exec run in the background, from
// byte from, following it with follow until the exec ends or ctx ends.
func (s *Service) ExecOutput(ctx context.Context, id, execID string, stderr bool, from int64, follow bool, w io.Writer, flush func()) error {
	return s.execs.Output(ctx, id, execID, stderr, from, follow, w, flush)
}
