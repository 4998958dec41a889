package execs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
)

// The control of a running exec: its timeout (SIGTERM, then SIGKILL after a
// grace, exit code ExitTimedOut), signals sent to it, its kill when the client
// of a stream goes away, and its output files followed while it runs.

// ExitTimedOut is the exit code of an exec stopped by its timeout (as
// coreutils' timeout gives).
const ExitTimedOut = 124

// DefaultKillGrace is how long a timed-out or killed exec has between SIGTERM
// and SIGKILL when its request does not say.
const DefaultKillGrace = 5 * time.Second

// running is an exec this daemon runs now.
type running struct {
	sandboxID, execID string
	sb                Sandbox
	grace             time.Duration

	mu      sync.Mutex
	handle  *backend.Sandbox // set once the exec started
	started chan struct{}    // closed when handle is set
	changed chan struct{}    // closed and made anew at each write of its output files
	// ended is closed once the command's output ended (or it never ran);
	// done once its code is recorded.
	ended, done chan struct{}
	endOnce     sync.Once
	timedOut    atomic.Bool
	killing     atomic.Bool
}

func (e *Execs) track(id, execID string, sb Sandbox, grace time.Duration) *running {
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	r := &running{sandboxID: id, execID: execID, sb: sb, grace: grace, started: make(chan struct{}), changed: make(chan struct{}), ended: make(chan struct{}), done: make(chan struct{})}
	e.mu.Lock()
	if e.live == nil {
		e.live = map[string]*running{}
	}
	e.live[execID] = r
	e.mu.Unlock()
	return r
}

// untrack forgets an exec whose end is recorded.
func (e *Execs) untrack(r *running) {
	e.mu.Lock()
	if e.live[r.execID] == r {
		delete(e.live, r.execID)
	}
	e.mu.Unlock()
	close(r.done)
}

func (e *Execs) lookup(execID string) *running {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.live[execID]
}

func (r *running) setStarted(h *backend.Sandbox) {
	r.mu.Lock()
	r.handle = h
	r.mu.Unlock()
	close(r.started)
}

func (r *running) end() { r.endOnce.Do(func() { close(r.ended) }) }

// isDone says whether the exec's end (its code) is recorded.
func (r *running) isDone() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *running) isEnded() bool {
	select {
	case <-r.ended:
		return true
	default:
		return false
	}
}

// wrote says that an output file grew.
func (r *running) wrote() {
	r.mu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// watch is the channel closed at the next write, and whether the exec's end
// is recorded (its output then is whole).
func (r *running) watch() (<-chan struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.done:
		return r.changed, true
	default:
		return r.changed, false
	}
}

// startWait bounds how long a signal waits for an exec that was accepted to
// start and to record its process in the sandbox.
const startWait = 10 * time.Second

// signal sends sig to the exec's processes; gone: none is left. An exec is
// answered (a background one) before the backend has started it, and its
// process records itself in the sandbox only once it runs: a signal sent in
// between waits for both, as long as the exec's end is not recorded.
func (e *Execs) signal(r *running, sig string) (gone bool, err error) {
	deadline := time.NewTimer(startWait)
	defer deadline.Stop()
	// Its output may have ended (a client gone) while it runs on: only its
	// recorded end (done) means it ended.
	select {
	case <-r.started:
	default:
		select {
		case <-r.started:
		case <-r.done:
			return false, fmt.Errorf("cannot signal exec %s: it ended: %w", r.execID, store.ErrInvalidState)
		case <-e.ctx().Done():
			return false, e.ctx().Err()
		case <-deadline.C:
			return false, fmt.Errorf("cannot signal exec %s: it has not started within %s: %w", r.execID, startWait, store.ErrInvalidState)
		}
	}
	r.mu.Lock()
	h := r.handle
	r.mu.Unlock()
	for {
		gone, err = r.sb.Signal(e.ctx(), h, r.execID, sig)
		if !errors.Is(err, backend.ErrExecNotRecorded) {
			return gone, err
		}
		select {
		case <-r.done:
			return true, nil
		case <-e.ctx().Done():
			return false, err
		case <-deadline.C:
			return false, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kill ends the exec's processes, once: SIGTERM, then SIGKILL after its grace
// unless its end was recorded first. why names the cause in the daemon's log.
// Its output's end is no proof of its end: the holder of a direct stream that
// goes away says first that the stream ended (its copy of it did), and the
// command runs on.
func (e *Execs) kill(r *running, why string) {
	if r.isDone() || !r.killing.CompareAndSwap(false, true) {
		return
	}
	e.host.Go(func() {
		log := e.host.Log().With("sandbox", r.sandboxID, "exec", r.execID, "why", why)
		gone, err := e.signal(r, "TERM")
		if err != nil {
			if !r.isDone() && e.ctx().Err() == nil {
				log.Warn("cannot stop the exec", "error", err.Error())
			}
			return
		}
		if gone {
			return
		}
		select {
		case <-r.done:
			return
		case <-e.ctx().Done():
			return
		case <-time.After(r.grace):
		}
		log.Info("the exec outlived its grace after SIGTERM: SIGKILL", "grace", r.grace.String())
		if _, err := e.signal(r, "KILL"); err != nil && !r.isDone() {
			log.Warn("cannot kill the exec", "error", err.Error())
		}
	})
}

// arm starts the exec's timeout, once it started: at expiry exec.timed_out
// is recorded and the exec killed. The returned func disarms it.
func (e *Execs) arm(r *running, timeout time.Duration) func() {
	if timeout <= 0 {
		return func() {}
	}
	t := time.AfterFunc(timeout, func() {
		if r.isEnded() {
			return
		}
		r.timedOut.Store(true)
		e.host.Emit(r.sandboxID, store.Event{Kind: "exec.timed_out", ExecID: r.execID, Signal: "SIGTERM",
			Extra: map[string]string{"timeout": seconds(timeout), "kill_grace": seconds(r.grace)}})
		e.kill(r, "timeout")
	})
	return func() { t.Stop() }
}

// seconds is d as the API's seconds.
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

// Kill ends a streamed exec whose client went away (SIGTERM, then SIGKILL
// after its grace), unless it ended already.
func (e *Streamed) Kill() {
	if e.kill != nil {
		e.kill()
	}
}

// Signal sends sig (a signal's name or number) to the processes of a
// streamed exec (an attached client's signal frame).
func (e *Streamed) Signal(sig string) error {
	if e.signal == nil {
		return errors.New("cannot signal the exec")
	}
	return e.signal(sig)
}

// Signal sends sig (a signal's name or number, checked by the caller) to the
// processes of exec execID of sandbox id, which this daemon runs.
func (e *Execs) Signal(id, execID, sig string) error {
	rec, err := e.store.GetExec(id, execID)
	if err != nil {
		return err
	}
	if rec.ExitCode != nil {
		return fmt.Errorf("cannot signal exec %s: it ended (exit code %d): %w", execID, *rec.ExitCode, store.ErrInvalidState)
	}
	r := e.lookup(execID)
	if r == nil || r.sandboxID != id {
		return fmt.Errorf("cannot signal exec %s: its caller runs it, not the daemon: %w", execID, store.ErrInvalidState)
	}
	if _, err := e.signal(r, sig); err != nil {
		if r.isEnded() {
			return fmt.Errorf("cannot signal exec %s: it ended: %w", execID, store.ErrInvalidState)
		}
		return err
	}
	return nil
}

// List returns the exec records of sandbox id, oldest first: with running
// only those that have not ended, with limit > 0 the last limit of them.
func (e *Execs) List(id string, runningOnly bool, limit int) ([]store.Exec, error) {
	out, err := e.store.ListExecs(id, runningOnly)
	if err != nil {
		return nil, err
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

// Output streams an output file of exec execID of sandbox id (stderr: its
// stderr, else stdout) to w from byte from; with follow it goes on with what
// the command writes until it ends, or ctx ends. flush is called after each
// copy. An exec that streamed its output to its caller has no files.
func (e *Execs) Output(ctx context.Context, id, execID string, stderr bool, from int64, follow bool, w io.Writer, flush func()) error {
	rec, err := e.store.GetExec(id, execID)
	if err != nil {
		return err
	}
	file := rec.StdoutPath
	if stderr {
		file = rec.StderrPath
	}
	if file == "" {
		return fmt.Errorf("cannot read the output of exec %s: it was streamed to its caller, not kept in files: %w", execID, store.ErrInvalidState)
	}
	var r *running
	if follow && rec.ExitCode == nil {
		if r = e.lookup(execID); r != nil && r.sandboxID != id {
			r = nil
		}
	}
	var f *os.File
	for f == nil {
		var changed <-chan struct{}
		ended := true
		if r != nil {
			changed, ended = r.watch()
		}
		if f, err = os.Open(file); err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) || ended {
			return fmt.Errorf("cannot read the output of exec %s: %w", execID, err)
		}
		// Not made yet: the exec is starting.
		select {
		case <-changed:
		case <-r.done:
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return fmt.Errorf("cannot read the output of exec %s from byte %d: %w", execID, from, err)
	}
	for {
		var changed <-chan struct{}
		ended := true
		if r != nil {
			changed, ended = r.watch()
		}
		if _, err := io.Copy(w, f); err != nil {
			return nil // the client went away
		}
		flush()
		if ended {
			return nil
		}
		select {
		case <-changed:
		case <-r.done:
		case <-ctx.Done():
			return nil
		}
	}
}

// notifying is an output file whose writes tell the exec's followers.
type notifying struct {
	w io.Writer
	r *running
}

func (n notifying) Write(p []byte) (int, error) {
	k, err := n.w.Write(p)
	n.r.wrote()
	return k, err
}
