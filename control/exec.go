package control

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/execs"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/internal/ids"
)

// ExecRequest is a command to run in a ready sandbox (the API's exec request).
type ExecRequest = execs.Request

// StreamedExec is a running exec whose caller has its streams.
type StreamedExec = execs.Streamed

// newExecs returns the API execs of s (package execs), which see of s only
// its context, log, events and the sandbox an exec runs in.
func newExecs(s *Service) *execs.Execs {
	return execs.New(s.store, execs.Host{
		Context:  func() context.Context { return s.ctx },
		Log:      func() *slog.Logger { return s.log },
		Go:       s.goAsync,
		Recorded: s.events.recorded,
		Emit:     func(id string, ev store.Event) { s.events.emit(id, ev, "") },
		Began:    s.execBegan,
		Finished: s.execFinished,
	}, execs.Config{OutputRoot: s.cfg.ExecOutputRoot, OutputTemplate: s.cfg.ExecOutputTemplate, OutputMax: s.cfg.ExecOutputMax})
}

// execSandbox is a sandbox's side of one of its execs.
type execSandbox struct {
	s     *Service
	id    string
	l     *live
	began time.Time // when the daemon took the exec in (its start is timed from then)
}

func (x execSandbox) Handle(ctx context.Context) (*backend.Sandbox, error) {
	if h := x.l.handle; h != nil {
		return h, nil
	}
	return x.s.rtOf(x.id).Open(ctx, x.id, x.l.resolved)
}

func (x execSandbox) Exec(ctx context.Context, sb *backend.Sandbox, req backend.ExecRequest, st backend.Streams) (*backend.Exec, error) {
	rt := x.s.rtOf(x.id)
	ex, err := rt.Exec(ctx, sb, req, st)
	if ctx.Err() == nil {
		x.s.metrics.execStarted(backendName(rt.Location()), time.Since(x.began), err)
	}
	return ex, err
}

// Gone counts the exec out and marks the sandbox active.
func (x execSandbox) Gone() {
	x.s.mu.Lock()
	x.l.execs--
	x.s.lives.active[x.id] = time.Now()
	x.s.mu.Unlock()
}

// execBegan counts an exec of sandbox id in (the reaper leaves a sandbox
// with execs alone).
func (s *Service) execBegan(id string) execs.Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lives.locked(id)
	l.execs++
	return execSandbox{s: s, id: id, l: l, began: time.Now()}
}

// execFinished counts out an exec of sandbox id its caller ran.
func (s *Service) execFinished(id string) {
	s.mu.Lock()
	if l := s.lives.locked(id); l.execs > 0 {
		l.execs--
	}
	s.lives.active[id] = time.Now()
	s.mu.Unlock()
}

// Exec runs a command in a ready sandbox with its output in files; for an
// exec the caller runs itself, see RecordExec.
func (s *Service) Exec(id string, req *ExecRequest) (store.Exec, error) {
	execID, err := s.beginExec(id, req)
	if err != nil {
		return store.Exec{}, err
	}
	return s.execs.Run(id, execID, req)
}

// ExecStream runs a command in a ready sandbox with stdin (nil: none) and its
// output written to stdout and stderr as it comes (execs.Execs.Stream).
func (s *Service) ExecStream(id string, req *ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (*StreamedExec, error) {
	execID, err := s.beginExec(id, req)
	if err != nil {
		return nil, err
	}
	return s.execs.Stream(id, execID, req, stdin, stdout, stderr)
}

// beginExec checks an exec request of sandbox id and returns its exec ID (the
// caller's, checked, or a new one).
func (s *Service) beginExec(id string, req *ExecRequest) (string, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return "", err
	}
	if err := pausedError(rec, "exec in"); err != nil {
		return "", err
	}
	if rec.State != store.StateReady {
		return "", notIn(id, rec.State, "ready")
	}
	if req.Shell {
		if len(req.Cmd) > 0 {
			return "", errorf(ErrInvalidRequest, "give cmd or shell, not both")
		}
		l := s.lives.of(id)
		h := l.handle
		if h == nil {
			if h, err = s.rtOf(id).Open(s.ctx, id, l.resolved); err != nil {
				return "", err
			}
		}
		req.Cmd = s.rtOf(id).Shell(s.ctx, h)
	}
	if len(req.Cmd) == 0 {
		return "", errorf(ErrInvalidRequest, "cmd is required")
	}
	if req.ID == "" {
		return ids.New(), nil
	}
	if err := ids.Validate(req.ID); err != nil {
		return "", err
	}
	return req.ID, nil
}

// RecordExec records an exec the caller runs itself (airlock exec streams
// straight to the Engine): exec.started now, exec.finished when FinishExec is
// called.
func (s *Service) RecordExec(id string, req *ExecRequest) (store.Exec, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return store.Exec{}, err
	}
	if err := pausedError(rec, "exec in"); err != nil {
		return store.Exec{}, err
	}
	if rec.State != store.StateReady {
		return store.Exec{}, notIn(id, rec.State, "ready")
	}
	execID := req.ID
	if execID == "" {
		execID = ids.New()
	}
	return s.execs.Record(id, execID, req)
}

// FinishExec records the end of an exec the caller ran.
func (s *Service) FinishExec(id, execID string, code int) (store.Exec, error) {
	return s.execs.Finish(id, execID, code)
}

// GetExec returns an exec record.
func (s *Service) GetExec(id, execID string) (store.Exec, error) {
	return s.execs.Get(id, execID)
}
