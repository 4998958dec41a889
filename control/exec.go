package control

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/internal/ids"
)

// ExecRequest is a command to run in a ready sandbox (the API's exec request).
type ExecRequest struct {
	// ID is the caller's exec ID; "" for a new one.
	ID      string
	Cmd     []string
	Env     []string
	Workdir string
	// TTY runs it on a terminal (an attached exec only).
	TTY bool
	// Shell runs the sandbox's shell (Backend.Shell), with Cmd empty.
	Shell bool
	// Direct, with TTY, asks the backend for the terminal's stream itself
	// (StreamedExec.Direct), for a client on this host to use with no hop.
	Direct bool
	// Height and Width, with TTY, are the terminal's size from the start.
	Height, Width uint
}

// execAbandoned is runExec's answer when the daemon stopped before the exec ended.
const execAbandoned = -1

// exitCodeWait bounds how long runExec asks the Engine for the code of an exec
// whose output ended, every exitCodePoll.
const (
	exitCodeWait = 5 * time.Second
	exitCodePoll = 10 * time.Millisecond
)

// Exec runs a command in a ready sandbox with its output in files (execPaths);
// for an exec the caller runs itself, see RecordExec.
func (s *Service) Exec(id string, req *ExecRequest) (store.Exec, error) {
	execID, err := s.beginExec(id, req)
	if err != nil {
		return store.Exec{}, err
	}
	stdoutPath, stderrPath, err := execPaths(s.cfg.ExecOutputRoot, s.cfg.ExecOutputTemplate, id, execID)
	if err != nil {
		return store.Exec{}, err
	}
	ex, err := s.startExec(store.Exec{ID: execID, SandboxID: id, Cmd: req.Cmd, StartedAt: time.Now(), StdoutPath: stdoutPath, StderrPath: stderrPath})
	if err != nil {
		return store.Exec{}, err
	}
	l := s.liveOf(id)
	s.mu.Lock()
	l.execs++
	s.mu.Unlock()
	s.goAsync(func() {
		code, truncated := s.runExec(id, l, req, stdoutPath, stderrPath)
		s.endExec(id, execID, l, code, truncated)
	})
	return ex, nil
}

// beginExec checks an exec request of sandbox id and returns its exec ID (the
// caller's, checked, or a new one).
func (s *Service) beginExec(id string, req *ExecRequest) (string, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return "", err
	}
	if rec.State != store.StateReady {
		return "", notIn(id, rec.State, "ready")
	}
	if req.Shell {
		if len(req.Cmd) > 0 {
			return "", errorf(ErrInvalidRequest, "give cmd or shell, not both")
		}
		l := s.liveOf(id)
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

// runExec runs an API exec with its output in files, each bounded by
// Config.ExecOutputMax (cappedOutput), and returns its exit code and whether
// an output file was cut.
func (s *Service) runExec(id string, l *live, req *ExecRequest, stdoutPath, stderrPath string) (int, bool) {
	if err := os.MkdirAll(filepath.Dir(stdoutPath), 0o700); err != nil {
		return 125, false
	}
	outf, err := os.OpenFile(stdoutPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 125, false
	}
	defer outf.Close()
	errf, err := os.OpenFile(stderrPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 125, false
	}
	defer errf.Close()
	cut := func(file string) func(string) {
		return func(why string) { s.log.Warn("exec output truncated", "sandbox", id, "file", file, "why", why) }
	}
	stdout := newCappedOutput(outf, s.cfg.ExecOutputMax, cut(stdoutPath))
	stderr := newCappedOutput(errf, s.cfg.ExecOutputMax, cut(stderrPath))
	code := s.collectExec(id, l, req, nil, nil, stdout, stderr, nil)
	return code, stdout.Truncated() || stderr.Truncated()
}

// ExecStream runs a command in a ready sandbox with stdin (nil: none) and its
// output written to stdout and stderr as it comes (a streamed API exec, whose
// caller reads it). The code arrives on the returned channel once the command
// ended; the exec is recorded (exec.started, exec.finished) like any other.
// The writers must not block: a caller that went away is written to no more.
func (s *Service) ExecStream(id string, req *ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (*StreamedExec, error) {
	execID, err := s.beginExec(id, req)
	if err != nil {
		return nil, err
	}
	ex := store.Exec{ID: execID, SandboxID: id, Cmd: req.Cmd, StartedAt: time.Now().UTC()}
	rec := &pendingRecord{done: make(chan struct{})}
	if req.ID != "" {
		// The caller's ID may be taken: answered before the stream starts.
		if ex, err = s.startExec(ex); err != nil {
			return nil, err
		}
		close(rec.done)
	} else {
		// A new ID: the record (one disk write) is made while the backend
		// makes the exec, and the command starts once it is (BeforeStart).
		go func() {
			_, rec.err = s.startExec(ex)
			close(rec.done)
		}()
	}
	l := s.liveOf(id)
	s.mu.Lock()
	l.execs++
	s.mu.Unlock()
	done := make(chan int, 1)
	se := &StreamedExec{Record: ex, Done: done, Recorded: rec.wait, ctx: s.ctx, running: make(chan struct{}), height: req.Height, width: req.Width}
	s.goAsync(func() {
		code := s.collectExec(id, l, req, rec.wait, stdin, stdout, stderr, se.started)
		se.once.Do(func() { close(se.running) })
		if rec.wait() != nil {
			// Never recorded, never started (collectExec said why): no end to record.
			s.execGone(id, l)
		} else {
			s.endExec(id, execID, l, code, false)
		}
		done <- code
	})
	return se, nil
}

// pendingRecord is the outcome of an exec's record being written.
type pendingRecord struct {
	done chan struct{}
	err  error
}

// wait returns once the record is written, with the error that kept it from
// being written.
func (p *pendingRecord) wait() error {
	<-p.done
	return p.err
}

// StreamedExec is a running exec whose caller has its streams.
type StreamedExec struct {
	Record store.Exec
	// Done gives the exit code once the command ended.
	Done <-chan int
	// Recorded returns once Record is in the store (the command starts only
	// then), with the error that kept it out (the command then never starts).
	Recorded func() error

	ctx     context.Context
	mu      sync.Mutex
	ex      *backend.Exec
	height  uint // a size asked for before the exec started
	width   uint
	running chan struct{}
	once    sync.Once
	direct  *os.File
}

// Direct is, once Running is closed, the terminal stream the backend handed
// over for an ExecRequest.Direct (nil when it did not: the streams given to
// ExecStream carry it); the caller takes it over and closes it.
func (e *StreamedExec) Direct() *os.File {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.direct
	e.direct = nil
	return f
}

// EndDirect says the Direct stream's holder read its end: the exit code follows.
func (e *StreamedExec) EndDirect() {
	e.mu.Lock()
	ex := e.ex
	e.mu.Unlock()
	if ex != nil {
		ex.EndDirect()
	}
}

func (e *StreamedExec) started(ex *backend.Exec) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ex = ex
	e.direct = ex.Direct
	if e.height > 0 && e.width > 0 {
		_ = ex.Resize(e.ctx, e.height, e.width)
	}
	e.once.Do(func() { close(e.running) })
}

// Running is closed once the exec started with the size asked for before
// (or could not start): input sent after it meets the terminal as sized.
func (e *StreamedExec) Running() <-chan struct{} { return e.running }

// Resize sets the terminal size of an exec with a TTY (kept for the start
// when it has not started yet).
func (e *StreamedExec) Resize(height, width uint) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ex == nil {
		e.height, e.width = height, width
		return nil
	}
	return e.ex.Resize(e.ctx, height, width)
}

// endExec records the end of an exec the daemon ran.
func (s *Service) endExec(id, execID string, l *live, code int, truncated bool) {
	ev := store.Event{Kind: "exec.finished", ExitCode: &code}
	if code == execAbandoned {
		// The daemon stops: the command may go on in the sandbox, but
		// nobody collects its output or code any more. Say so.
		ev = store.Event{Kind: "exec.finished", Reason: "daemon_stopped: the daemon stopped while the command ran; its output after that and its exit code were not collected"}
	}
	// The record's end and its event in one write.
	if _, ev, err := s.store.FinishExecEvent(id, execID, store.ExecEnd{ExitCode: code, FinishedAt: time.Now(), Truncated: truncated}, ev); ev.Sequence != 0 {
		s.recorded(ev)
	} else if err != nil {
		s.log.Warn("cannot record event", "sandbox", id, "kind", "exec.finished", "error", err.Error())
	}
	s.execGone(id, l)
}

// execGone counts an exec of sandbox id out and marks the sandbox active.
func (s *Service) execGone(id string, l *live) {
	s.mu.Lock()
	l.execs--
	s.active[id] = time.Now()
	s.mu.Unlock()
}

// collectExec runs an API exec with stdin (nil: none) and its output to
// stdout and stderr and returns its exit code; recorded, when not nil, is
// waited for before the command starts (its error keeps it from starting).
func (s *Service) collectExec(id string, l *live, req *ExecRequest, recorded func() error, stdin io.Reader, stdout, stderr io.Writer, started func(*backend.Exec)) int {
	var err error
	h := l.handle
	if h == nil {
		if h, err = s.rtOf(id).Open(s.ctx, id, l.resolved); err != nil {
			return s.execFailed(stderr, err)
		}
	}
	ex, err := s.rtOf(id).Exec(s.ctx, h, backend.ExecRequest{Cmd: req.Cmd, Env: req.Env, Workdir: req.Workdir, TTY: req.TTY, Stdin: stdin != nil, Direct: req.Direct, BeforeStart: recorded}, backend.Streams{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err != nil {
		return s.execFailed(stderr, err)
	}
	if started != nil {
		started(ex)
	}
	select {
	case <-ex.Done:
	case <-s.ctx.Done():
	}
	if s.ctx.Err() != nil {
		// Shutdown must not wait for a command that may run for hours (an
		// upgrade would SIGKILL the daemon after 5 s and record nothing). The
		// shutdown also ends the exec's stream, so Done may be what woke us:
		// the command did not end, its collection did.
		return execAbandoned
	}
	// The output ended: the Engine knows the code at once, or very soon.
	code, err := backoff.RetryWithData(func() (int, error) { return ex.ExitCode(s.ctx) },
		backoff.WithContext(backoff.WithMaxRetries(backoff.NewConstantBackOff(exitCodePoll), uint64(exitCodeWait/exitCodePoll)), s.ctx))
	if err != nil {
		return s.execFailed(io.Discard, err)
	}
	return code
}

// RecordExec records an exec the caller runs itself (airlock exec streams
// straight to the Engine): exec.started now, exec.finished when FinishExec is
// called.
func (s *Service) RecordExec(id string, req *ExecRequest) (store.Exec, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return store.Exec{}, err
	}
	if rec.State != store.StateReady {
		return store.Exec{}, notIn(id, rec.State, "ready")
	}
	execID := req.ID
	if execID == "" {
		execID = ids.New()
	}
	ex, err := s.startExec(store.Exec{ID: execID, SandboxID: id, Cmd: req.Cmd, StartedAt: time.Now()})
	if err != nil {
		return store.Exec{}, err
	}
	s.mu.Lock()
	s.liveLocked(id).execs++
	s.mu.Unlock()
	return ex, nil
}

// startExec writes an exec's record and its exec.started event in one write.
func (s *Service) startExec(ex store.Exec) (store.Exec, error) {
	ex, ev, err := s.store.StartExec(ex, store.Event{Kind: "exec.started"})
	if err != nil {
		return store.Exec{}, err
	}
	s.recorded(ev)
	return ex, nil
}

// FinishExec records the end of an exec the caller ran.
func (s *Service) FinishExec(id, execID string, code int) (store.Exec, error) {
	ex, err := s.store.FinishExec(id, execID, code, time.Now())
	if err != nil {
		return store.Exec{}, err
	}
	s.emit(id, store.Event{Kind: "exec.finished", ExecID: execID, ExitCode: &code}, "")
	s.mu.Lock()
	if l := s.liveLocked(id); l.execs > 0 {
		l.execs--
	}
	s.active[id] = time.Now()
	s.mu.Unlock()
	return ex, nil
}

// GetExec returns an exec record.
func (s *Service) GetExec(id, execID string) (store.Exec, error) {
	return s.store.GetExec(id, execID)
}

// execFailed records why an exec could not run in its stderr log and returns its
// code: 125, or execAbandoned when the daemon is stopping (which is what made
// the Engine call fail then, not the command).
func (s *Service) execFailed(errf io.Writer, err error) int {
	if s.ctx.Err() != nil {
		return execAbandoned
	}
	fmt.Fprintln(errf, "airlock:", err)
	return 125
}
