package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
)

// StreamProtocol is the Upgrade token of an attached exec: POST
// /v1/sandboxes/{id}/execs with Connection: Upgrade and Upgrade:
// airlock-stream is answered 101, and the connection then carries frames
// both ways (docs/api.md).
const StreamProtocol = "airlock-stream"

// Frame types of an attached exec's stream. A frame is a header of 8 bytes —
// the type, three zero bytes, the payload's length (big-endian uint32), as the
// Docker Engine's multiplexed streams — then the payload.
const (
	FrameStdin  byte = 0 // client to daemon: stdin bytes; an empty one ends stdin
	FrameStdout byte = 1 // daemon to client
	FrameStderr byte = 2 // daemon to client
	FrameExit   byte = 3 // daemon to client, last: ExitFrame as JSON
	FrameResize byte = 4 // client to daemon: ResizeFrame as JSON
	FrameSignal byte = 5 // client to daemon: SignalFrame as JSON (the main command only)
)

// MaxFramePayload bounds one frame's payload.
const MaxFramePayload = 1 << 20

// ExitFrame is the payload of the last frame of an attached stream.
type ExitFrame struct {
	// ExecID is the exec's ID ("" for a sandbox's main command).
	ExecID   string `json:"exec_id"`
	ExitCode int    `json:"exit_code"`
	// Error says why the exit code is not known (ExitCode is then -1).
	Error string `json:"error,omitempty"`
	// DaemonsStopping: the main command exited and its output is all sent,
	// while some of the sandbox's daemons still shut down (a run created
	// with fast_end): the sandbox stops, and may write, a little later.
	DaemonsStopping bool `json:"daemons_stopping,omitempty"`
}

// SignalFrame asks for a signal to the main command: a number ("15") or a
// name ("SIGTERM").
type SignalFrame struct {
	Signal string `json:"signal"`
}

// ResizeFrame asks for a terminal size.
type ResizeFrame struct {
	Height uint `json:"height"`
	Width  uint `json:"width"`
}

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxFramePayload {
		return fmt.Errorf("cannot write a frame of %d bytes (at most %d)", len(payload), MaxFramePayload)
	}
	var hdr [8]byte
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(payload)))
	if _, err := w.Write(append(hdr[:], payload...)); err != nil {
		return err
	}
	return nil
}

// ReadFrame reads one frame.
func ReadFrame(r io.Reader) (typ byte, payload []byte, err error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[4:])
	if n > MaxFramePayload {
		return 0, nil, fmt.Errorf("cannot read a frame of %d bytes (at most %d)", n, MaxFramePayload)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return hdr[0], payload, nil
}

// ExecSession is an attached exec or main command: its output is being
// written to the writers given to ExecAttach or Attach; Wait gives its exit
// code.
type ExecSession struct {
	conn io.ReadWriteCloser
	wmu  sync.Mutex
	done chan struct{}
	exit ExitFrame
	err  error
}

// ExecAttach runs a command in a ready sandbox attached over one connection
// (the StreamProtocol upgrade): stdin (nil: none) is sent as the command
// reads it, its output written to stdout and stderr as it comes (with
// req.TTY, the terminal's output all to stdout). Resize sets a TTY's size;
// Wait returns the exit code.
func (c *Client) ExecAttach(ctx context.Context, id string, req *ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (*ExecSession, error) {
	return c.upgrade(ctx, "/v1/sandboxes/"+url.PathEscape(id)+"/execs", req, stdin, stdout, stderr)
}

// AttachMain connects to the main command of a sandbox (run's): stdin (nil: none)
// is forwarded when req.Stdin, its output written to stdout and stderr as it
// comes (on a TTY all to stdout). Attach before resuming a created sandbox so
// that no output is missed. Signal and Resize reach the main command; Wait
// returns its exit code.
func (c *Client) AttachMain(ctx context.Context, id string, req *AttachRequest, stdin io.Reader, stdout, stderr io.Writer) (*ExecSession, error) {
	if req == nil {
		req = &AttachRequest{}
	}
	if !req.Stdin {
		stdin = nil
	}
	return c.upgrade(ctx, "/v1/sandboxes/"+url.PathEscape(id)+"/attach", req, stdin, stdout, stderr)
}

// upgrade POSTs req to path asking for a StreamProtocol upgrade, and runs the
// session's frames.
func (c *Client) upgrade(ctx context.Context, path string, req any, stdin io.Reader, stdout, stderr io.Writer) (*ExecSession, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("cannot encode the request: %w", err)
	}
	resp, err := c.sendRaw(ctx, http.MethodPost, path, bytes.NewReader(b),
		http.Header{"Content-Type": {"application/json"}, "Connection": {"Upgrade"}, "Upgrade": {StreamProtocol}})
	if err != nil {
		return nil, err
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("cannot attach: the daemon answered %s, not 101 Switching Protocols", resp.Status)
	}
	s := &ExecSession{conn: conn, done: make(chan struct{})}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	go s.read(bufio.NewReader(conn), stdout, stderr)
	go s.send(stdin)
	return s, nil
}

// read copies the output frames until the exit frame.
func (s *ExecSession) read(r io.Reader, stdout, stderr io.Writer) {
	defer close(s.done)
	for {
		typ, p, err := ReadFrame(r)
		if err != nil {
			s.err = fmt.Errorf("cannot read the exec's stream: %w", err)
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				s.err = errors.New("cannot read the exec's stream: it ended before the exit code")
			}
			return
		}
		switch typ {
		case FrameStdout:
			_, _ = stdout.Write(p)
		case FrameStderr:
			_, _ = stderr.Write(p)
		case FrameExit:
			if err := json.Unmarshal(p, &s.exit); err != nil {
				s.err = fmt.Errorf("cannot read the exec's exit frame: %w", err)
			} else if s.exit.Error != "" {
				s.err = &Error{Reason: ReasonEngine, Message: s.exit.Error}
			}
			return
		}
	}
}

// send copies stdin to stdin frames, then ends stdin.
func (s *ExecSession) send(stdin io.Reader) {
	if stdin != nil {
		buf := make([]byte, 32<<10)
		for {
			n, err := stdin.Read(buf)
			if n > 0 && s.write(FrameStdin, buf[:n]) != nil {
				return
			}
			if err != nil {
				break
			}
		}
	}
	_ = s.write(FrameStdin, nil)
}

func (s *ExecSession) write(typ byte, p []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return WriteFrame(s.conn, typ, p)
}

// Resize sets the exec's terminal size.
func (s *ExecSession) Resize(height, width uint) error {
	b, _ := json.Marshal(ResizeFrame{Height: height, Width: width})
	return s.write(FrameResize, b)
}

// Signal sends a signal (a number, or a name such as "SIGTERM") to the main
// command (an attached exec takes none).
func (s *ExecSession) Signal(signal string) error {
	b, _ := json.Marshal(SignalFrame{Signal: signal})
	return s.write(FrameSignal, b)
}

// Done is closed once the exit code (or an error) is known.
func (s *ExecSession) Done() <-chan struct{} { return s.done }

// Wait returns the exec's ID and exit code once it ended, and closes the connection.
func (s *ExecSession) Wait() (execID string, code int, err error) {
	<-s.done
	s.conn.Close()
	return s.exit.ExecID, s.exit.ExitCode, s.err
}

// Exit is the session's exit frame, once Wait returned.
func (s *ExecSession) Exit() ExitFrame {
	<-s.done
	return s.exit
}

// Close ends the session without waiting (the command runs on).
func (s *ExecSession) Close() error { return s.conn.Close() }
