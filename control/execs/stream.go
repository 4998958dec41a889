package execs

import (
	"context"
	"io"
	"os"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
)

// Stream runs a command in sandbox id (checked ready; execID is the
// caller's, checked, when req.ID is set, else a new one) with stdin (nil:
// none) and its output written to stdout and stderr as it comes (a streamed
// API exec, whose caller reads it). The code arrives on the returned
// Streamed's Done once the command ended; the exec is recorded
// (exec.started, exec.finished) like any other. The writers must not block:
// a caller that went away is written to no more.
func (e *Execs) Stream(id, execID string, req *Request, stdin io.Reader, stdout, stderr io.Writer) (*Streamed, error) {
	ex := store.Exec{ID: execID, SandboxID: id, Cmd: req.Cmd, StartedAt: time.Now().UTC()}
	rec := &pendingRecord{done: make(chan struct{})}
	if req.ID != "" {
		// The caller's ID may be taken: answered before the stream starts.
		var err error
		if ex, err = e.start(ex); err != nil {
			return nil, err
		}
		close(rec.done)
	} else {
		// A new ID: the record (one disk write) is made while the backend
		// makes the exec, and the command starts once it is (BeforeStart).
		go func() {
			_, rec.err = e.start(ex)
			close(rec.done)
		}()
	}
	sb := e.host.Began(id)
	r := e.track(id, execID, sb, req.KillGrace)
	done := make(chan int, 1)
	se := &Streamed{Record: ex, Done: done, Recorded: rec.wait, ctx: e.ctx(), running: make(chan struct{}), height: req.Height, width: req.Width,
		kill: func() { e.kill(r, "its client went away") }, signal: func(sig string) error { _, err := e.signal(r, sig); return err }}
	e.host.Go(func() {
		code := e.collect(sb, req, rec.wait, stdin, stdout, stderr, se.started, r)
		r.end()
		se.once.Do(func() { close(se.running) })
		if rec.wait() != nil {
			// Never recorded, never started (collect said why): no end to record.
			e.untrack(r)
			sb.Gone()
		} else {
			e.end(id, execID, sb, code, false, r)
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

// Streamed is a running exec whose caller has its streams.
type Streamed struct {
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
	ahead   []byte
	kill    func()
	signal  func(sig string) error
}

// Direct is, once Running is closed, the terminal stream the backend handed
// over for a Request.Direct (nil when it did not: the streams given to
// Stream carry it), and the output read before it that comes first
// (backend.Exec.DirectAhead); the caller takes it over and closes it.
func (e *Streamed) Direct() (*os.File, []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f, ahead := e.direct, e.ahead
	e.direct, e.ahead = nil, nil
	return f, ahead
}

// EndDirect says the Direct stream's holder read its end: the exit code follows.
func (e *Streamed) EndDirect() {
	e.mu.Lock()
	ex := e.ex
	e.mu.Unlock()
	if ex != nil {
		ex.EndDirect()
	}
}

func (e *Streamed) started(ex *backend.Exec) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ex = ex
	e.direct, e.ahead = ex.Direct, ex.DirectAhead
	if e.height > 0 && e.width > 0 {
		_ = ex.Resize(e.ctx, e.height, e.width)
	}
	e.once.Do(func() { close(e.running) })
}

// Running is closed once the exec started with the size asked for before
// (or could not start): input sent after it meets the terminal as sized.
func (e *Streamed) Running() <-chan struct{} { return e.running }

// Resize sets the terminal size of an exec with a TTY (kept for the start
// when it has not started yet).
func (e *Streamed) Resize(height, width uint) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ex == nil {
		e.height, e.width = height, width
		return nil
	}
	return e.ex.Resize(e.ctx, height, width)
}
