package control

import (
	"bytes"
	"context"
	"io"
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
	switch rec.State {
	case store.StatePending, store.StateReady:
	case store.StateStopped, store.StateFailed:
		if !req.Replay {
			return nil, notIn(id, rec.State, "pending or ready")
		}
	default:
		return nil, notIn(id, rec.State, "pending, ready, stopped or failed")
	}
	if rec.ContainerID == "" {
		return nil, errorf(store.ErrInvalidState, "sandbox %s has no main container yet", id)
	}
	release, err := s.Attach(id)
	if err != nil {
		return nil, err
	}
	rt := s.rtOf(id)
	l := s.liveOf(id)
	h := l.handle
	if h == nil {
		if h, err = rt.Open(ctx, id, l.resolved); err != nil {
			release()
			return nil, err
		}
	}
	// A run that need not wait for its daemons' shutdown ends at the marker
	// the supervisor writes after the main command's output (on stdout and
	// stderr, or once on a terminal), with the code, before the container
	// exits; what comes after the marker is not the client's.
	var marked chan markedEnd
	var filters []*endFilter
	if rec.EndMarker != "" {
		marked = make(chan markedEnd, 1)
		need := 2
		if h.TTY {
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
				marked <- markedEnd{code: m.Code, sealed: allSealed, status: status}
			}
		}
		fo, fe := newEndFilter(stdout, rec.EndMarker, found), newEndFilter(stderr, rec.EndMarker, found)
		stdout, stderr, filters = fo, fe, []*endFilter{fo, fe}
	}
	actx, cancel := context.WithCancel(s.ctx)
	stop := context.AfterFunc(ctx, cancel) // the client went away
	codes, waitErrs := rt.WaitExit(actx, h)
	var output <-chan error
	if req.Replay {
		// The main command may end before the Engine took this wait (it
		// answers the next exit only, and is taken asynchronously): a replay,
		// rare (a client whose daemon went away), also polls for the code.
		codes = pollExit(actx, rt, h.PrimaryID, codes)
		output = followOnceStarted(actx, rt, h, skipBytes(stdout, req.SkipStdout), skipBytes(stderr, req.SkipStderr))
	} else {
		streams := backend.Streams{Stdout: stdout, Stderr: stderr}
		if req.Stdin {
			streams.Stdin = stdin
		}
		if output, err = rt.Attach(actx, h, streams); err != nil {
			stop()
			cancel()
			release()
			return nil, err
		}
	}
	done := make(chan PrimaryEnd, 1)
	go func() {
		defer release()
		defer cancel()
		defer stop()
		var end PrimaryEnd
		select {
		case end.ExitCode = <-codes:
			select {
			case <-output:
			case <-time.After(primaryDrain):
			}
			for _, f := range filters {
				f.flush() // the output ended without a marker
			}
			select {
			case m := <-marked:
				// The supervisor, which exits right after a sealed end, was
				// seen gone before its marker: the stream it carried is final.
				if m.sealed && m.status != nil {
					s.status.finalStatus(id, l, m.status)
				}
			default:
			}
		case m := <-marked:
			end.ExitCode, end.DaemonsStopping = m.code, true
			if m.sealed && m.status != nil {
				// The container may be seen stopped before the marker is
				// believed: its catch-up waits for the stream carried.
				s.status.expectFinal(l)
			}
			if m.sealed {
				// A sealed end: every daemon stopped and nothing else of the
				// sandbox runs; only its container's exit is still to come.
				// A process in the sandbox can print the marker too: believed
				// only when the Engine lists nothing but PID 1; otherwise the
				// container's exit ends the run, as without a marker.
				if sc, ok := rt.(interface {
					OnlyInitRuns(ctx context.Context, containerID string) bool
				}); ok && sc.OnlyInitRuns(actx, h.PrimaryID) {
					end.DaemonsStopping = false
					if m.status != nil {
						s.status.finalStatus(id, l, m.status)
					}
					break
				}
				s.log.Info("a sealed end marker not believed: the run ends with its container", "sandbox", id)
				s.status.finalStatus(id, l, nil) // not believed: read from the container
				select {
				case end.ExitCode = <-codes:
					// The container exited: nothing of the sandbox runs.
					end.DaemonsStopping = false
				case end.Err = <-waitErrs:
				case <-actx.Done():
					end.Err = actx.Err()
				}
			}
		case end.Err = <-waitErrs:
		case <-actx.Done():
			end.Err = actx.Err()
		}
		if end.Err == nil && rec.Kind == backend.KindRun {
			// What the run's CLI now knows, shown until the stop is recorded;
			// at the marker, its daemons still stop.
			code, marker := end.ExitCode, len(filters) > 0 && !filtersFlushed(filters)
			s.setFlags(l, func() {
				l.mainExit = &code
				if marker {
					l.mainEnded = time.Now()
				}
			})
		}
		done <- end
	}()
	return &AttachedPrimary{Done: done, s: s, rt: rt, h: h, cancel: cancel}, nil
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

// endFilter passes what is written to it on to w up to the end marker of a
// nonce (supervisor.EndMarker), calls found with the marker's code, and drops
// what follows. The start of a possible marker split across writes is held
// back until the rest tells (flush writes what is held).
type endFilter struct {
	mu    sync.Mutex
	w     io.Writer
	nonce string
	start []byte
	held  []byte
	done  bool
	found func(supervisor.EndMark)
}

// markedEnd is the code of a run's end marker, whether it was sealed, and
// the status stream a sealed one carried.
type markedEnd struct {
	code   int
	sealed bool
	status []byte
}

// filtersFlushed reports whether no filter saw its marker.
func filtersFlushed(fs []*endFilter) bool {
	for _, f := range fs {
		f.mu.Lock()
		done := f.done
		f.mu.Unlock()
		if done {
			return false
		}
	}
	return true
}

func newEndFilter(w io.Writer, nonce string, found func(supervisor.EndMark)) *endFilter {
	return &endFilter{w: w, nonce: nonce, start: []byte(supervisor.EndMarkerStart(nonce)), found: found}
}

func (f *endFilter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(p)
	if f.done {
		return n, nil
	}
	data := p
	if len(f.held) > 0 {
		data = append(f.held, p...)
		f.held = nil
	}
	for len(data) > 0 {
		i := bytes.IndexByte(data, f.start[0])
		if i < 0 {
			f.pass(data)
			return n, nil
		}
		f.pass(data[:i])
		rest := data[i:]
		switch {
		case len(rest) < len(f.start) && bytes.HasPrefix(f.start, rest),
			bytes.HasPrefix(rest, f.start) && !bytes.Contains(rest, []byte("\x1b\\")) && len(rest) < supervisor.MaxEndMarker:
			f.held = append([]byte(nil), rest...) // a marker may be coming
			return n, nil
		case bytes.HasPrefix(rest, f.start):
			if m, ok := supervisor.ParseEndMarker(rest, f.nonce); ok {
				f.done = true
				f.found(m)
				return n, nil
			}
		}
		f.pass(rest[:1])
		data = rest[1:]
	}
	return n, nil
}

// pass writes b on; a client that went away is the caller's to notice.
func (f *endFilter) pass(b []byte) {
	if len(b) > 0 {
		_, _ = f.w.Write(b)
	}
}

// flush writes what is held back: the output ended without a marker.
func (f *endFilter) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done {
		f.pass(f.held)
		f.held = nil
	}
}
