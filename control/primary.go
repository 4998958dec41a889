package control

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/supervisor"
)

// primaryDrain bounds how long an attached client's output may still be
// copied once the main command's exit code is known (the Engine may deliver
// the code before the last output).
const primaryDrain = 5 * time.Second

// AttachRequest asks for the main command's streams (the API's attach).
type AttachRequest struct {
	// Stdin forwards the client's input to the main command (the sandbox
	// must have been created with stdin).
	Stdin bool
	// Replay, for a client that lost its daemon mid-run, sends the output
	// from its start instead of from now, less the bytes the client already
	// has (SkipStdout, SkipStderr); no stdin is forwarded then.
	Replay                 bool
	SkipStdout, SkipStderr int64
}

// AttachedPrimary is a client's attachment to a sandbox's main command.
type AttachedPrimary struct {
	// Done gives the main command's end once its output was copied.
	Done <-chan PrimaryEnd

	s      *Service
	rt     backend.Backend
	h      *backend.Sandbox
	cancel context.CancelFunc
}

// PrimaryEnd is how a main command ended: its exit code, or why it is not known.
type PrimaryEnd struct {
	ExitCode int
	Err      error
	// DaemonsStopping: the output ended with the end marker, some daemons
	// still shutting down.
	DaemonsStopping bool
}

// AttachPrimary connects stdin, stdout and stderr to the main command of
// sandbox id (on a TTY its output all goes to stdout). A live attach is made
// before the sandbox starts so that no output is lost; it returns once the
// backend's stream is up. The writers must not block for long: the caller
// drops what a client that went away would have received.
func (s *Service) AttachPrimary(ctx context.Context, id string, req *AttachRequest, stdin io.Reader, stdout, stderr io.Writer) (*AttachedPrimary, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return nil, err
	}
	if err := attachable(id, rec, req); err != nil {
		return nil, err
	}
	release, err := s.Attach(id)
	if err != nil {
		return nil, err
	}
	rt := s.rtOf(id)
	l := s.lives.of(id)
	h := l.handle
	if h == nil {
		if h, err = rt.Open(ctx, id, l.resolved); err != nil {
			release()
			return nil, err
		}
	}
	w := &primaryWait{id: id, l: l, rt: rt, h: h, run: rec.Kind == backend.KindRun,
		status: s.status, log: s.log, setFlags: s.lives.setFlags}
	if rec.EndMarker != "" {
		stdout, stderr = w.watchMarker(rec.EndMarker, stdout, stderr)
	}
	actx, cancel := context.WithCancel(s.ctx)
	stop := context.AfterFunc(ctx, cancel) // the client went away
	if err := w.attach(actx, req, stdin, stdout, stderr); err != nil {
		stop()
		cancel()
		release()
		return nil, err
	}
	done := make(chan PrimaryEnd, 1)
	go func() {
		defer release()
		defer cancel()
		defer stop()
		done <- w.wait(actx)
	}()
	return &AttachedPrimary{Done: done, s: s, rt: rt, h: h, cancel: cancel}, nil
}

// attachable says whether sandbox id's record allows an attach to its main
// command (a stopped or failed one only for a replay).
func attachable(id string, rec store.Sandbox, req *AttachRequest) error {
	if err := pausedError(rec, "attach to"); err != nil {
		return err
	}
	switch rec.State {
	case store.StatePending, store.StateReady:
	case store.StateStopped, store.StateFailed:
		if !req.Replay {
			return notIn(id, rec.State, "pending or ready")
		}
	default:
		return notIn(id, rec.State, "pending, ready, stopped or failed")
	}
	if rec.ContainerID == "" {
		return errorf(store.ErrInvalidState, "sandbox %s has no main container yet", id)
	}
	return nil
}

// primaryWait is one attach to a main command (AttachPrimary) from its
// streams to its end: the code the backend waits for, the end of its output,
// the end marker in that output.
type primaryWait struct {
	id  string
	l   *live
	rt  backend.Backend
	h   *backend.Sandbox
	run bool // a run sandbox: the code its CLI got is noted

	status   *follower
	log      *slog.Logger
	setFlags func(l *live, f func())

	codes    <-chan int
	waitErrs <-chan error
	output   <-chan error // the end of the copied output
	// marked gives the end marker once it was seen on every stream it is
	// written to (nil: the sandbox has none); filters are those streams'.
	marked  chan markedEnd
	filters []*endFilter
}

// watchMarker returns stdout and stderr filtered for the end marker of nonce.
// A run that need not wait for its daemons' shutdown ends at the marker the
// supervisor writes after the main command's output (on stdout and stderr, or
// once on a terminal), with the code, before the container exits; what comes
// after the marker is not the client's.
func (w *primaryWait) watchMarker(nonce string, stdout, stderr io.Writer) (io.Writer, io.Writer) {
	w.marked = make(chan markedEnd, 1)
	need := 2
	if w.h.TTY {
		need = 1
	}
	var mu sync.Mutex
	allSealed := true
	var status []byte
	found := func(m supervisor.EndMark) {
		mu.Lock()
		defer mu.Unlock()
		allSealed = allSealed && m.Sealed
		if m.Status != nil {
			status = m.Status
		}
		if need--; need == 0 {
			w.marked <- markedEnd{code: m.Code, sealed: allSealed, status: status}
		}
	}
	fo, fe := newEndFilter(stdout, nonce, found), newEndFilter(stderr, nonce, found)
	w.filters = []*endFilter{fo, fe}
	return fo, fe
}

// attach starts the wait for the main command's code and the copy of its
// output: attached live, or, for a replay, followed from its start.
func (w *primaryWait) attach(ctx context.Context, req *AttachRequest, stdin io.Reader, stdout, stderr io.Writer) error {
	w.codes, w.waitErrs = w.rt.WaitExit(ctx, w.h)
	if req.Replay {
		// The main command may end before the Engine took this wait (it
		// answers the next exit only, and is taken asynchronously): a replay,
		// rare (a client whose daemon went away), also polls for the code.
		w.codes = pollExit(ctx, w.rt, w.h.PrimaryID, w.codes)
		w.output = followOnceStarted(ctx, w.rt, w.h, skipBytes(stdout, req.SkipStdout), skipBytes(stderr, req.SkipStderr))
		return nil
	}
	streams := backend.Streams{Stdout: stdout, Stderr: stderr}
	if req.Stdin {
		streams.Stdin = stdin
	}
	var err error
	w.output, err = w.rt.Attach(ctx, w.h, streams)
	return err
}

// wait returns how the main command ended: at its container's exit, at its
// end marker, or without a code (the backend's wait failed, the client went
// away).
func (w *primaryWait) wait(ctx context.Context) PrimaryEnd {
	var end PrimaryEnd
	select {
	case end.ExitCode = <-w.codes:
		w.exited()
	case m := <-w.marked:
		end = w.atMarker(ctx, m)
	case end.Err = <-w.waitErrs:
	case <-ctx.Done():
		end.Err = ctx.Err()
	}
	if end.Err == nil && w.run {
		w.noteEnd(end.ExitCode)
	}
	return end
}

// exited finishes an attach whose container exited: the rest of the output is
// copied (for at most primaryDrain), and a sealed end's stream it carried
// recorded.
func (w *primaryWait) exited() {
	select {
	case <-w.output:
	case <-time.After(primaryDrain):
	}
	for _, f := range w.filters {
		f.flush() // the output ended without a marker
	}
	select {
	case m := <-w.marked:
		// The supervisor, which exits right after a sealed end, was
		// seen gone before its marker: the stream it carried is final.
		if m.sealed && m.status != nil {
			w.status.finalStatus(w.id, w.l, m.status)
		}
	default:
	}
}

// atMarker is the end of a main command at its end marker m: its daemons
// still stopping, or, for a sealed end that is believed, the sandbox's end.
func (w *primaryWait) atMarker(ctx context.Context, m markedEnd) PrimaryEnd {
	end := PrimaryEnd{ExitCode: m.code, DaemonsStopping: true}
	if m.sealed && m.status != nil {
		// The container may be seen stopped before the marker is
		// believed: its catch-up waits for the stream carried.
		w.status.expectFinal(w.l)
	}
	if !m.sealed {
		return end
	}
	// A sealed end: every daemon stopped and nothing else of the
	// sandbox runs; only its container's exit is still to come.
	// A process in the sandbox can print the marker too: believed
	// only when the Engine lists nothing but PID 1; otherwise the
	// container's exit ends the run, as without a marker.
	if sc, ok := w.rt.(interface {
		OnlyInitRuns(ctx context.Context, containerID string) bool
	}); ok && sc.OnlyInitRuns(ctx, w.h.PrimaryID) {
		end.DaemonsStopping = false
		if m.status != nil {
			// Its events are recorded while the code goes to the client
			// (a store write each); what follows the stop waits for them
			// (expectFinal).
			w.status.goAsync(func() { w.status.finalStatus(w.id, w.l, m.status) })
		}
		return end
	}
	w.log.Info("a sealed end marker not believed: the run ends with its container", "sandbox", w.id)
	w.status.finalStatus(w.id, w.l, nil) // not believed: read from the container
	select {
	case end.ExitCode = <-w.codes:
		// The container exited: nothing of the sandbox runs.
		end.DaemonsStopping = false
	case end.Err = <-w.waitErrs:
	case <-ctx.Done():
		end.Err = ctx.Err()
	}
	return end
}

// noteEnd keeps what the run's CLI now knows, code, shown until the stop is
// recorded; at the marker, its daemons still stop.
func (w *primaryWait) noteEnd(code int) {
	marker := len(w.filters) > 0 && !filtersFlushed(w.filters)
	w.setFlags(w.l, func() {
		w.l.mainExit = &code
		if marker {
			w.l.mainEnded = time.Now()
		}
	})
}

// replayPoll is how often a replayed attach asks for the main command's code.
const replayPoll = 200 * time.Millisecond

// startPoll is how often a replayed attach to a main command not started yet
// asks whether it started.
const startPoll = 50 * time.Millisecond

// followOnceStarted is the backend's FollowOutput of sandbox h's main command
// once its container started (or ended): a client whose daemon went away
// between its attach and the start attaches again (a replay) before the start
// it then asks for, and the output of a container not started yet would end
// at once, empty.
func followOnceStarted(ctx context.Context, rt backend.Backend, h *backend.Sandbox, stdout, stderr io.Writer) <-chan error {
	if rt.Running(ctx, h.PrimaryID) || rt.ExitCode(ctx, h.PrimaryID) != nil {
		return rt.FollowOutput(ctx, h, stdout, stderr)
	}
	out := make(chan error, 1)
	go func() {
		t := time.NewTicker(startPoll)
		defer t.Stop()
		for !rt.Running(ctx, h.PrimaryID) && rt.ExitCode(ctx, h.PrimaryID) == nil {
			select {
			case <-t.C:
			case <-ctx.Done():
				out <- ctx.Err()
				return
			}
		}
		out <- <-rt.FollowOutput(ctx, h, stdout, stderr)
	}()
	return out
}

// pollExit gives the code from waited, or from asking the backend every
// replayPoll, whichever comes first.
func pollExit(ctx context.Context, rt backend.Backend, containerID string, waited <-chan int) <-chan int {
	out := make(chan int, 1)
	go func() {
		t := time.NewTicker(replayPoll)
		defer t.Stop()
		for {
			if code := rt.ExitCode(ctx, containerID); code != nil {
				out <- *code
				return
			}
			select {
			case code := <-waited:
				out <- code
				return
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// Signal sends a signal (a number or a name) to the supervisor, which forwards
// it to the main command.
func (a *AttachedPrimary) Signal(signal string) error {
	return a.rt.KillPrimary(a.s.ctx, a.h.PrimaryID, signal)
}

// Resize sets the main command's terminal size.
func (a *AttachedPrimary) Resize(height, width uint) error {
	return a.rt.Resize(a.s.ctx, a.h, height, width)
}

// Close detaches (the main command runs on).
func (a *AttachedPrimary) Close() { a.cancel() }

// skipBytes drops the first n bytes written to w.
func skipBytes(w io.Writer, n int64) io.Writer {
	if n <= 0 {
		return w
	}
	var mu sync.Mutex
	return writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		all := len(p)
		if n > 0 {
			k := min(int64(len(p)), n)
			n -= k
			p = p[k:]
		}
		if len(p) > 0 {
			if _, err := w.Write(p); err != nil {
				return 0, err
			}
		}
		return all, nil
	})
}
