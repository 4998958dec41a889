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
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
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
	FrameSignal byte = 5 // client to daemon: SignalFrame as JSON (to the main command, or to an attached exec's processes)
	// FrameDirect, daemon to client, first on an exec asked for with
	// ExecRequest.Direct: with the payload DirectFD, it carries the
	// terminal's stream itself as an SCM_RIGHTS descriptor (a Unix socket
	// only), which the client then reads and writes raw, stdin and output,
	// and sends FrameDirectEnded once it read the stream's end; empty, the
	// frames carry the stream as without Direct. The client sends stdin only
	// after this frame.
	FrameDirect byte = 6
	// FrameDirectEnded, client to daemon: the direct stream ended (the exit
	// frame follows).
	FrameDirectEnded byte = 7
	// FrameResume, client to daemon, on an attached main command of a
	// sandbox created without start (empty payload): start it, as POST
	// /v1/sandboxes/{id}/resume would, without a request of its own. A
	// start refused ends the stream with an exit frame naming why.
	FrameResume byte = 8
)

// DirectFD is the payload of a FrameDirect that carries a descriptor.
const DirectFD = "fd"

// DirectHeader, on the 101 answer to an ExecRequest.Direct, says that a
// FrameDirect comes first (a daemon without it sends none).
const DirectHeader = "Airlock-Direct"

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
	if _, err := w.Write(FrameBytes(typ, payload)); err != nil {
		return err
	}
	return nil
}

// FrameBytes is one frame as written (a payload of at most MaxFramePayload).
func FrameBytes(typ byte, payload []byte) []byte {
	b := make([]byte, 8, 8+len(payload))
	b[0] = typ
	binary.BigEndian.PutUint32(b[4:], uint32(len(payload)))
	return append(b, payload...)
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
	// A direct session (upgradeDirect): what receives the descriptor, stdin
	// held until FrameDirect, and the stream it handed over.
	fds    *fdReader
	stdin  io.Reader
	direct io.Closer
}

// ExecAttach runs a command in a ready sandbox attached over one connection
// (the StreamProtocol upgrade): stdin (nil: none) is sent as the command
// reads it, its output written to stdout and stderr as it comes (with
// req.TTY, the terminal's output all to stdout). Resize sets a TTY's size;
// Wait returns the exit code.
//
// On a terminal, through the daemon's Unix socket, the daemon hands the
// terminal's stream over (ExecRequest.Direct): the session then copies it
// raw, with no hop between the caller and the Engine.
func (c *Client) ExecAttach(ctx context.Context, id string, req *ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (*ExecSession, error) {
	path := "/v1/sandboxes/" + url.PathEscape(id) + "/execs"
	if req.TTY && c.socket != "" {
		r := *req
		r.Direct = true
		return c.upgradeDirect(ctx, path, &r, stdin, stdout, stderr)
	}
	r := *req
	r.Direct = false
	return c.upgrade(ctx, path, &r, stdin, stdout, stderr)
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

// upgradeDirect is upgrade for an ExecRequest.Direct, on its own connection
// to the daemon's Unix socket, read so that the descriptor a FrameDirect
// carries is received.
func (c *Client) upgradeDirect(ctx context.Context, path string, req *ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (*ExecSession, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("cannot encode the request: %w", err)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the airlock daemon: %w", err)
	}
	uc := nc.(*net.UnixConn)
	stop := context.AfterFunc(ctx, func() { uc.Close() })
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		stop()
		uc.Close()
		return nil, fmt.Errorf("cannot make the request: %w", err)
	}
	hr.Header = http.Header{"Content-Type": {"application/json"}, "Connection": {"Upgrade"}, "Upgrade": {StreamProtocol}}
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	fr := &fdReader{c: uc}
	br := bufio.NewReader(fr)
	var resp *http.Response
	if err = hr.Write(uc); err == nil {
		resp, err = http.ReadResponse(br, hr)
	}
	if !stop() || err != nil {
		uc.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("cannot reach the airlock daemon: %w", err)
	}
	if resp.StatusCode >= 400 {
		err := responseError(resp)
		uc.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		uc.Close()
		return nil, fmt.Errorf("cannot attach: the daemon answered %s, not 101 Switching Protocols", resp.Status)
	}
	s := &ExecSession{conn: uc, done: make(chan struct{}), fds: fr, stdin: stdin}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if resp.Header.Get(DirectHeader) == "" {
		s.fds = nil // a daemon that hands nothing over
		go s.send(stdin)
	}
	go s.read(br, stdout, stderr)
	return s, nil
}

// fdReader reads a Unix socket, keeping the descriptors that come with the
// bytes (SCM_RIGHTS).
type fdReader struct {
	c   *net.UnixConn
	mu  sync.Mutex
	fds []int
	oob []byte
}

func (r *fdReader) Read(p []byte) (int, error) {
	if r.oob == nil {
		r.oob = make([]byte, syscall.CmsgSpace(4*4))
	}
	n, oobn, _, _, err := r.c.ReadMsgUnix(p, r.oob)
	n = max(n, 0) // -1 with an error
	if oobn > 0 {
		msgs, _ := syscall.ParseSocketControlMessage(r.oob[:oobn])
		for i := range msgs {
			fds, _ := syscall.ParseUnixRights(&msgs[i])
			r.mu.Lock()
			r.fds = append(r.fds, fds...)
			r.mu.Unlock()
		}
	}
	return n, err
}

// take gives the first descriptor received, or -1.
func (r *fdReader) take() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fds) == 0 {
		return -1
	}
	fd := r.fds[0]
	r.fds = r.fds[1:]
	return fd
}

// closeRest closes the descriptors received and not taken.
func (r *fdReader) closeRest() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, fd := range r.fds {
		_ = syscall.Close(fd)
	}
	r.fds = nil
}

// startDirect takes a FrameDirect: with a descriptor, the terminal's stream
// is copied raw, its output to stdout (then FrameDirectEnded), stdin to it;
// without, stdin goes in frames as for any session.
func (s *ExecSession) startDirect(payload []byte, stdout io.Writer) {
	fd := -1
	if string(payload) == DirectFD {
		fd = s.fds.take()
	}
	s.fds.closeRest()
	if fd < 0 {
		go s.send(s.stdin)
		return
	}
	// Blocking reads and writes on the socket itself, each in its own
	// goroutine: a keystroke's echo wakes the reading thread in the kernel
	// directly, with no trip through the runtime's poller.
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		_ = s.write(FrameDirectEnded, nil)
		return
	}
	ds := &directStream{fd: fd}
	s.wmu.Lock()
	s.direct = ds
	s.wmu.Unlock()
	go func() {
		_, _ = io.Copy(stdout, ds)
		ds.release()
		_ = s.write(FrameDirectEnded, nil)
	}()
	if s.stdin != nil {
		// On a terminal the end of stdin is not passed on (the Engine would
		// end the terminal's output with it).
		go func() { _, _ = io.Copy(ds, s.stdin) }()
	}
}

// directStream is a handed-over stream's socket in blocking mode. Its reader
// releases the descriptor once it read the end; Close shuts the socket down,
// which ends that read. Once released, the descriptor's number is never used
// again: the process may have reused it for another socket (an HTTP
// connection), which a late shutdown or write would cut.
type directStream struct {
	fd int
	// life is held for reading while fd is used (a Write, a Close's
	// shutdown) and for writing to release it.
	life   sync.RWMutex
	closed bool       // guarded by life
	wmu    sync.Mutex // one Write at a time
}

func (d *directStream) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(d.fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (d *directStream) Write(p []byte) (int, error) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	d.life.RLock()
	defer d.life.RUnlock()
	if d.closed {
		return 0, net.ErrClosed
	}
	written := 0
	for written < len(p) {
		n, err := unix.Write(d.fd, p[written:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return written, err
		}
		written += n
	}
	return written, nil
}

// Close ends the stream both ways (the reader then releases it); after the
// release it does nothing.
func (d *directStream) Close() error {
	d.life.RLock()
	defer d.life.RUnlock()
	if d.closed {
		return nil
	}
	return unix.Shutdown(d.fd, unix.SHUT_RDWR)
}

// release closes the descriptor, once its reader is done with it (only its
// reader calls it, once).
func (d *directStream) release() {
	// A writer blocked on a full socket returns, and gives life back.
	_ = unix.Shutdown(d.fd, unix.SHUT_RDWR)
	d.life.Lock()
	defer d.life.Unlock()
	if !d.closed {
		d.closed = true
		_ = unix.Close(d.fd)
	}
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
		case FrameDirect:
			if s.fds != nil {
				s.startDirect(p, stdout)
			}
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

// Signal sends a signal (a number, or a name such as "SIGTERM") to what the
// session runs: the main command of an attach, or an exec's process group.
func (s *ExecSession) Signal(signal string) error {
	b, _ := json.Marshal(SignalFrame{Signal: signal})
	return s.write(FrameSignal, b)
}

// Resume asks, on an attached main command's stream, for its sandbox's
// start (FrameResume): a refusal ends the stream (Wait says why).
func (s *ExecSession) Resume() error { return s.write(FrameResume, nil) }

// Done is closed once the exit code (or an error) is known.
func (s *ExecSession) Done() <-chan struct{} { return s.done }

// Wait returns the exec's ID and exit code once it ended, and closes the connection.
func (s *ExecSession) Wait() (execID string, code int, err error) {
	<-s.done
	s.Close()
	return s.exit.ExecID, s.exit.ExitCode, s.err
}

// Exit is the session's exit frame, once Wait returned.
func (s *ExecSession) Exit() ExitFrame {
	<-s.done
	return s.exit
}

// Direct reports whether the daemon handed the terminal's stream over
// (ExecRequest.Direct): it then flows between the caller and the Engine.
func (s *ExecSession) Direct() bool {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.direct != nil
}

// Close ends the session without waiting: an exec's command is killed (the
// daemon sends SIGTERM, then SIGKILL), a main command runs on.
func (s *ExecSession) Close() error {
	s.wmu.Lock()
	if s.direct != nil {
		s.direct.Close()
	}
	s.wmu.Unlock()
	return s.conn.Close()
}
