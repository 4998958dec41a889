// Package execs is the daemon's API execs: their records (exec.started,
// exec.finished), the files their output goes to, bounded, and the
// lifecycle of one (run, collected, its code recorded; abandoned when the
// daemon stops), streamed to its caller or not.
//
// The daemon (package control) checks a request against its sandbox and
// holds one Execs, which sees of the daemon only Host: its context, its
// log, its events and the sandbox an exec runs in.
package execs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
)

// Request is a command to run in a ready sandbox (the API's exec request).
type Request struct {
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
	// (Streamed.Direct), for a client on this host to use with no hop.
	Direct bool
	// Height and Width, with TTY, are the terminal's size from the start.
	Height, Width uint
	// Timeout, when not 0, ends the command that long after it started:
	// SIGTERM, then SIGKILL after KillGrace (0: DefaultKillGrace), its exit
	// code ExitTimedOut.
	Timeout, KillGrace time.Duration
}

// abandoned is run's answer when the daemon stopped before the exec ended.
const abandoned = -1

// exitCodeWait bounds how long collect asks the Engine for the code of an
// exec whose output ended, every exitCodePoll.
const (
	exitCodeWait = 5 * time.Second
	exitCodePoll = 10 * time.Millisecond
)

// Store is what the execs need of the daemon's store: exec records, each
// change with its event in one write.
type Store interface {
	StartExec(ex store.Exec, started store.Event) (store.Exec, store.Event, error)
	FinishExecEvent(sandboxID, execID string, end store.ExecEnd, finished store.Event) (store.Exec, store.Event, error)
	FinishExec(sandboxID, execID string, exitCode int, finishedAt time.Time) (store.Exec, error)
	GetExec(sandboxID, execID string) (store.Exec, error)
	ListExecs(sandboxID string, runningOnly bool) ([]store.Exec, error)
}

// Sandbox is the daemon's side of the sandbox one exec runs in.
type Sandbox interface {
	// Handle is the sandbox's handle, opened when the daemon holds none.
	Handle(ctx context.Context) (*backend.Sandbox, error)
	// Exec runs a command in it (the backend's Exec).
	Exec(ctx context.Context, sb *backend.Sandbox, req backend.ExecRequest, s backend.Streams) (*backend.Exec, error)
	// Gone counts the exec out and marks the sandbox active.
	Gone()
	// Signal sends sig to the processes of exec execID, started in sb
	// (backend.Backend.SignalExec): gone is true when none is left.
	Signal(ctx context.Context, sb *backend.Sandbox, execID, sig string) (gone bool, err error)
}

// Host is what the execs need of the daemon.
type Host struct {
	// Context is the daemon's: it ends when the daemon stops, and the execs
	// still running are abandoned then.
	Context func() context.Context
	Log     func() *slog.Logger
	// Go runs f in the background; the daemon's stop waits for it.
	Go func(f func())
	// Recorded is told of each event the store appended (the daemon's log).
	Recorded func(store.Event)
	// Emit appends an event of sandbox id.
	Emit func(id string, ev store.Event)
	// Began counts an exec of sandbox id in and returns the sandbox's side of it.
	Began func(id string) Sandbox
	// Finished counts out an exec of sandbox id its caller ran, and marks the
	// sandbox active.
	Finished func(id string)
}

// Config places and bounds the output files of the execs.
type Config struct {
	OutputRoot     string // artifacts.exec_output_root
	OutputTemplate string // artifacts.exec_output_template
	OutputMax      int64  // artifacts.exec_output_max (0: the default)
}

// Execs runs and records the daemon's API execs.
type Execs struct {
	store Store
	host  Host
	cfg   Config

	mu   sync.Mutex
	live map[string]*running // the execs run now, by ID (control.go)
}

// New returns the execs of a daemon.
func New(st Store, h Host, cfg Config) *Execs {
	return &Execs{store: st, host: h, cfg: cfg}
}

func (e *Execs) ctx() context.Context { return e.host.Context() }

// Run runs a command in sandbox id (checked ready, execID checked) with its
// output in files (outputPaths); for an exec the caller runs itself, see Record.
func (e *Execs) Run(id, execID string, req *Request) (store.Exec, error) {
	stdoutPath, stderrPath, err := outputPaths(e.cfg.OutputRoot, e.cfg.OutputTemplate, id, execID)
	if err != nil {
		return store.Exec{}, err
	}
	ex, err := e.start(store.Exec{ID: execID, SandboxID: id, Cmd: req.Cmd, StartedAt: time.Now(), StdoutPath: stdoutPath, StderrPath: stderrPath})
	if err != nil {
		return store.Exec{}, err
	}
	sb := e.host.Began(id)
	r := e.track(id, execID, sb, req.KillGrace)
	e.host.Go(func() {
		code, truncated := e.run(id, sb, req, stdoutPath, stderrPath, r)
		r.end()
		e.end(id, execID, sb, code, truncated, r)
	})
	return ex, nil
}

// run runs an API exec with its output in files, each bounded by
// Config.OutputMax (cappedOutput), and returns its exit code and whether an
// output file was cut.
func (e *Execs) run(id string, sb Sandbox, req *Request, stdoutPath, stderrPath string, r *running) (int, bool) {
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
		return func(why string) { e.host.Log().Warn("exec output truncated", "sandbox", id, "file", file, "why", why) }
	}
	stdout := newCappedOutput(notifying{outf, r}, e.cfg.OutputMax, cut(stdoutPath))
	stderr := newCappedOutput(notifying{errf, r}, e.cfg.OutputMax, cut(stderrPath))
	r.wrote() // the files are there
	code := e.collect(sb, req, nil, nil, stdout, stderr, nil, r)
	return code, stdout.Truncated() || stderr.Truncated()
}

// end records the end of an exec the daemon ran.
func (e *Execs) end(id, execID string, sb Sandbox, code int, truncated bool, r *running) {
	defer e.untrack(r)
	ev := store.Event{Kind: "exec.finished", ExitCode: &code}
	switch {
	case code == ExitTimedOut && r.timedOut.Load():
		ev.Reason = "timeout"
	case code == abandoned:
		// The daemon stops: the command may go on in the sandbox, but
		// nobody collects its output or code any more. Say so.
		ev = store.Event{Kind: "exec.finished", Reason: "daemon_stopped: the daemon stopped while the command ran; its output after that and its exit code were not collected"}
	}
	// The record's end and its event in one write.
	if _, ev, err := e.store.FinishExecEvent(id, execID, store.ExecEnd{ExitCode: code, FinishedAt: time.Now(), Truncated: truncated, TimedOut: ev.Reason == "timeout"}, ev); ev.Sequence != 0 {
		e.host.Recorded(ev)
	} else if err != nil {
		e.host.Log().Warn("cannot record event", "sandbox", id, "kind", "exec.finished", "error", err.Error())
	}
	sb.Gone()
}

// collect runs an API exec with stdin (nil: none) and its output to stdout
// and stderr and returns its exit code; recorded, when not nil, is waited for
// before the command starts (its error keeps it from starting).
func (e *Execs) collect(sb Sandbox, req *Request, recorded func() error, stdin io.Reader, stdout, stderr io.Writer, started func(*backend.Exec), r *running) int {
	ctx := e.ctx()
	h, err := sb.Handle(ctx)
	if err != nil {
		return e.failed(stderr, err)
	}
	ex, err := sb.Exec(ctx, h, backend.ExecRequest{ID: r.execID, Cmd: req.Cmd, Env: req.Env, Workdir: req.Workdir, TTY: req.TTY, Height: req.Height, Width: req.Width, Stdin: stdin != nil, Direct: req.Direct, BeforeStart: recorded}, backend.Streams{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err != nil {
		return e.failed(stderr, err)
	}
	r.setStarted(h)
	disarm := e.arm(r, req.Timeout)
	defer disarm()
	if started != nil {
		started(ex)
	}
	select {
	case <-ex.Done:
	case <-ctx.Done():
	}
	r.end()
	if ctx.Err() != nil {
		// Shutdown must not wait for a command that may run for hours (an
		// upgrade would SIGKILL the daemon after 5 s and record nothing). The
		// shutdown also ends the exec's stream, so Done may be what woke us:
		// the command did not end, its collection did.
		return abandoned
	}
	// The output ended: the Engine knows the code at once, or very soon.
	code, err := backoff.RetryWithData(func() (int, error) { return ex.ExitCode(ctx) },
		backoff.WithContext(backoff.WithMaxRetries(backoff.NewConstantBackOff(exitCodePoll), uint64(exitCodeWait/exitCodePoll)), ctx))
	if err != nil {
		return e.failed(io.Discard, err)
	}
	if r.timedOut.Load() {
		return ExitTimedOut
	}
	return code
}

// failed records why an exec could not run in its stderr log and returns its
// code: 125, or abandoned when the daemon is stopping (which is what made the
// Engine call fail then, not the command).
func (e *Execs) failed(errf io.Writer, err error) int {
	if e.ctx().Err() != nil {
		return abandoned
	}
	fmt.Fprintln(errf, "airlock:", err)
	return 125
}

// Record records an exec of sandbox id (checked ready) that the caller runs
// itself (airlock exec streams straight to the Engine): exec.started now,
// exec.finished when Finish is called.
func (e *Execs) Record(id, execID string, req *Request) (store.Exec, error) {
	ex, err := e.start(store.Exec{ID: execID, SandboxID: id, Cmd: req.Cmd, StartedAt: time.Now()})
	if err != nil {
		return store.Exec{}, err
	}
	e.host.Began(id)
	return ex, nil
}

// start writes an exec's record and its exec.started event in one write.
func (e *Execs) start(ex store.Exec) (store.Exec, error) {
	ex, ev, err := e.store.StartExec(ex, store.Event{Kind: "exec.started"})
	if err != nil {
		return store.Exec{}, err
	}
	e.host.Recorded(ev)
	return ex, nil
}

// Finish records the end of an exec the caller ran.
func (e *Execs) Finish(id, execID string, code int) (store.Exec, error) {
	ex, err := e.store.FinishExec(id, execID, code, time.Now())
	if err != nil {
		return store.Exec{}, err
	}
	e.host.Emit(id, store.Event{Kind: "exec.finished", ExecID: execID, ExitCode: &code})
	e.host.Finished(id)
	return ex, nil
}

// Get returns an exec record.
func (e *Execs) Get(id, execID string) (store.Exec, error) {
	return e.store.GetExec(id, execID)
}
