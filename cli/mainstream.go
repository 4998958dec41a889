package cli

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/airlock-dev/airlock/client"
)

// mainStream is the CLI's end of a run's main command, attached through the
// daemon: output to the CLI's stdout and stderr, stdin, signals and terminal
// size to the command, its exit code at the end. A daemon that goes away
// (killed, upgraded) is started again and the stream attached again, the output
// replayed from where the CLI had it.
type mainStream struct {
	// ended gives the main command's exit code, or why it is not known.
	ended chan mainEnd
	// exited is closed once the stream ended (before what it ended with is
	// sent on ended): with the main command's exit code, the sandbox started,
	// whether or not its start was seen.
	exited chan struct{}

	mu   sync.Mutex
	sess *client.ExecSession
}

type mainEnd struct {
	code int
	err  error
	// daemonsStopping: the output ended before the sandbox stopped, its
	// slow daemons still shutting down (a fast end).
	daemonsStopping bool
}

// attachMain attaches to the main command of run sandbox id, forwarding stdin
// when not nil.
func (a *app) attachMain(ctx context.Context, c *client.Client, id string, stdin io.Reader, daemonLost *atomic.Bool) (*mainStream, error) {
	stdout, stderr := &countingWriter{w: a.stdout}, &countingWriter{w: a.stderr}
	// Attached before the start (the main command has written nothing): a
	// daemon that goes away meanwhile is started again and asked again.
	sess, err := retryDaemon(a, ctx, func() (*client.ExecSession, error) {
		sess, err := c.AttachMain(ctx, id, &client.AttachRequest{Stdin: stdin != nil}, stdin, stdout, stderr)
		if lostDaemon(err) {
			daemonLost.Store(true)
		}
		return sess, err
	})
	if err != nil {
		return nil, err
	}
	m := &mainStream{ended: make(chan mainEnd, 1), exited: make(chan struct{}), sess: sess}
	go func() {
		for {
			_, code, err := sess.Wait()
			if err == nil {
				close(m.exited)
				m.ended <- mainEnd{code: code, daemonsStopping: sess.Exit().DaemonsStopping}
				return
			}
			if !lostDaemon(err) || ctx.Err() != nil {
				var ce *client.Error
				if errors.As(err, &ce) {
					err = errors.New(ce.Message)
				}
				close(m.exited)
				m.ended <- mainEnd{err: withCode(ExitAirlock, err)}
				return
			}
			daemonLost.Store(true)
			// Attach again through the daemon that answers now; the output
			// comes again from the start, less what was written here.
			_, err = retryDaemon(a, ctx, func() (*client.Sandbox, error) {
				next, err := c.AttachMain(ctx, id, &client.AttachRequest{Replay: true, SkipStdout: stdout.written(), SkipStderr: stderr.written()}, nil, stdout, stderr)
				if err == nil {
					sess = next
					m.mu.Lock()
					m.sess = next
					m.mu.Unlock()
				}
				return nil, err
			})
			if err != nil {
				close(m.exited)
				m.ended <- mainEnd{err: withCode(ExitAirlock, apiFailure(err))}
				return
			}
		}
	}()
	return m, nil
}

func (m *mainStream) current() *client.ExecSession {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sess
}

// signal sends a signal (its number) to the main command.
func (m *mainStream) signal(sig string) error { return m.current().Signal(sig) }

// resume asks for the sandbox's start on the stream (FrameResume): no
// request of its own; a start refused ends the stream.
func (m *mainStream) resume() error { return m.current().Resume() }

// resize sets the main command's terminal size.
func (m *mainStream) resize(height, width uint) error { return m.current().Resize(height, width) }

// countingWriter counts what was written through it.
type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingWriter) written() int64 { return c.n.Load() }

// heldReader reads r once open is closed: stdin forwarded from the start on,
// not before (the daemon takes a stream's frames in order, and a stdin frame
// waits for the main command to read it: a start asked on the stream after
// one would never be read).
type heldReader struct {
	r    io.Reader
	open <-chan struct{}
}

func (h heldReader) Read(p []byte) (int, error) {
	<-h.open
	return h.r.Read(p)
}
