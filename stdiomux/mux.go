// Package stdiomux carries many byte streams over one connection: the client
// of a remote daemon opens one `ssh … airlock daemon dial-stdio --mux` and
// then one stream per HTTP connection it would otherwise have dialed, each
// relayed to the daemon's socket on the far side. A stream is a plain
// connection to the daemon, so keep-alive, long answers (events, logs -f) and
// the upgraded streams of attached execs work on it as on a socket.
//
// A frame is a header of 9 bytes — the type, the stream's ID (big-endian
// uint32), the payload's length (big-endian uint32) — then the payload:
//
//   - open: the opener's new stream (IDs odd from the client, even from the
//     server); data may follow at once;
//   - data: bytes of the stream, at most the window the receiver granted;
//   - window: the receiver read that many bytes (uint32 payload) and grants
//     as many more;
//   - close-write: the sender writes no more (the receiver reads EOF once it
//     read what came before);
//   - close: the sender neither reads nor writes the stream any more; a
//     payload is an error message for the other side's reads.
//
// Each stream has a receive window of its own (Window bytes): the reader of
// the connection only appends to a stream's buffer, which never grows beyond
// the window, so a stream that nobody reads stops its writer only, never the
// other streams. When the connection ends (the remote command died) every
// stream fails with the connection's error, which for an ssh command names
// what ssh said on stderr.
package stdiomux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Frame types.
const (
	frameOpen       byte = 1
	frameData       byte = 2
	frameWindow     byte = 3
	frameCloseWrite byte = 4
	frameClose      byte = 5
)

const (
	headerLen = 9
	// Window is the bytes a stream may have in flight, sent and not yet read.
	Window = 256 << 10
	// maxData bounds one data frame's payload.
	maxData = 32 << 10
	// maxControl bounds the payload of the other frames.
	maxControl = 4 << 10
)

// ErrSessionClosed is the error of a stream's operations after Close of its
// session.
var ErrSessionClosed = errors.New("the multiplexed connection is closed")

// Session is one end of a multiplexed connection.
type Session struct {
	conn io.ReadWriteCloser

	wmu sync.Mutex // one frame at a time on conn

	mu      sync.Mutex
	streams map[uint32]*Stream
	nextID  uint32
	err     error // why the session ended (nil while it runs)
	done    chan struct{}
	backlog []*Stream // opened by the peer, not yet accepted
	accept  chan struct{}
	server  bool
}

// Client starts the opening side of conn: it opens streams (Open).
func Client(conn io.ReadWriteCloser) *Session { return newSession(conn, false) }

// Server starts the accepting side of conn: it takes the peer's streams
// (Accept).
func Server(conn io.ReadWriteCloser) *Session { return newSession(conn, true) }

func newSession(conn io.ReadWriteCloser, server bool) *Session {
	s := &Session{conn: conn, streams: map[uint32]*Stream{}, done: make(chan struct{}), accept: make(chan struct{}, 1), server: server, nextID: 1}
	if server {
		s.nextID = 2
	}
	go s.readLoop()
	return s
}

// Open starts a new stream.
func (s *Session) Open() (*Stream, error) {
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	id := s.nextID
	s.nextID += 2
	st := newStream(s, id)
	s.streams[id] = st
	s.mu.Unlock()
	if err := s.writeFrame(frameOpen, id, nil); err != nil {
		s.forget(id)
		return nil, err
	}
	return st, nil
}

// Accept waits for a stream the peer opened; it fails once the session ended.
func (s *Session) Accept() (*Stream, error) {
	for {
		s.mu.Lock()
		if len(s.backlog) > 0 {
			st := s.backlog[0]
			s.backlog = s.backlog[1:]
			s.mu.Unlock()
			return st, nil
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-s.accept:
		case <-s.done:
		}
	}
}

// Done is closed when the session ended; Err then says why.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended (nil while it runs).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the session and every stream, and closes the connection.
func (s *Session) Close() error {
	s.end(ErrSessionClosed)
	return nil
}

// end records err as why the session ended (the first one wins), fails every
// stream with it and closes the connection.
func (s *Session) end(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	streams := s.streams
	s.streams = map[uint32]*Stream{}
	s.mu.Unlock()
	close(s.done)
	for _, st := range streams {
		st.fail(err)
	}
	_ = s.conn.Close()
}

func (s *Session) forget(id uint32) {
	s.mu.Lock()
	delete(s.streams, id)
	s.mu.Unlock()
}

func (s *Session) writeFrame(typ byte, id uint32, payload []byte) error {
	b := make([]byte, headerLen+len(payload))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:5], id)
	binary.BigEndian.PutUint32(b[5:9], uint32(len(payload)))
	copy(b[headerLen:], payload)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.Err(); err != nil {
		return err
	}
	if _, err := s.conn.Write(b); err != nil {
		err = fmt.Errorf("cannot write to the multiplexed connection: %w", err)
		go s.end(err)
		return err
	}
	return nil
}

// readLoop reads the peer's frames until the connection ends. It never
// blocks on a stream: data goes to the stream's buffer, which the window
// bounds.
func (s *Session) readLoop() {
	var hdr [headerLen]byte
	for {
		if _, err := io.ReadFull(s.conn, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			s.end(fmt.Errorf("the multiplexed connection ended: %w", err))
			return
		}
		typ, id, n := hdr[0], binary.BigEndian.Uint32(hdr[1:5]), binary.BigEndian.Uint32(hdr[5:9])
		limit := uint32(maxControl)
		if typ == frameData {
			limit = maxData
		}
		if n > limit {
			s.end(fmt.Errorf("cannot read the multiplexed connection: a frame of type %d with %d bytes (at most %d)", typ, n, limit))
			return
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(s.conn, payload); err != nil {
			s.end(fmt.Errorf("the multiplexed connection ended: %w", err))
			return
		}
		if err := s.handle(typ, id, payload); err != nil {
			s.end(err)
			return
		}
	}
}

func (s *Session) handle(typ byte, id uint32, payload []byte) error {
	s.mu.Lock()
	st := s.streams[id]
	s.mu.Unlock()
	switch typ {
	case frameOpen:
		if st != nil || (id%2 == 0) != !s.server {
			return fmt.Errorf("cannot read the multiplexed connection: the peer opened stream %d twice or with the wrong parity", id)
		}
		st = newStream(s, id)
		s.mu.Lock()
		if s.err != nil {
			s.mu.Unlock()
			return nil
		}
		s.streams[id] = st
		s.backlog = append(s.backlog, st)
		s.mu.Unlock()
		select {
		case s.accept <- struct{}{}:
		default:
		}
	case frameData:
		if st == nil {
			return nil // a stream closed here, data already on its way
		}
		return st.receive(payload)
	case frameWindow:
		if st != nil && len(payload) == 4 {
			st.grant(binary.BigEndian.Uint32(payload))
		}
	case frameCloseWrite:
		if st != nil {
			st.remoteCloseWrite()
		}
	case frameClose:
		if st != nil {
			st.remoteClose(string(payload))
		}
	default:
		return fmt.Errorf("cannot read the multiplexed connection: unknown frame type %d", typ)
	}
	return nil
}

// Stream is one stream of a session, a net.Conn with CloseWrite. Deadlines
// are not supported (set ones are ignored).
type Stream struct {
	s  *Session
	id uint32

	mu   sync.Mutex
	cond *sync.Cond
	buf  []byte // received, not yet read
	// unacked is what was read and not yet granted back to the sender.
	unacked int
	// sendWindow is what this side may still send.
	sendWindow int
	readEOF    bool   // the peer wrote its last byte
	peerClosed bool   // the peer reads and writes no more
	peerMsg    string // the peer's close message
	closed     bool   // Close was called here
	wroteEOF   bool   // CloseWrite was called here
	err        error  // the session's end
}

func newStream(s *Session, id uint32) *Stream {
	st := &Stream{s: s, id: id, sendWindow: Window}
	st.cond = sync.NewCond(&st.mu)
	return st
}

// ID is the stream's number in its session.
func (st *Stream) ID() uint32 { return st.id }

func (st *Stream) receive(p []byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil
	}
	if len(st.buf)+st.unacked+len(p) > Window {
		return fmt.Errorf("cannot read the multiplexed connection: stream %d sent beyond its window", st.id)
	}
	st.buf = append(st.buf, p...)
	st.cond.Broadcast()
	return nil
}

func (st *Stream) grant(n uint32) {
	st.mu.Lock()
	st.sendWindow += int(n)
	st.cond.Broadcast()
	st.mu.Unlock()
}

func (st *Stream) remoteCloseWrite() {
	st.mu.Lock()
	st.readEOF = true
	st.cond.Broadcast()
	st.mu.Unlock()
}

func (st *Stream) remoteClose(msg string) {
	st.mu.Lock()
	st.readEOF, st.peerClosed, st.peerMsg = true, true, msg
	st.cond.Broadcast()
	st.mu.Unlock()
	if st.isClosed() {
		st.s.forget(st.id)
	}
}

func (st *Stream) isClosed() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.closed
}

func (st *Stream) fail(err error) {
	st.mu.Lock()
	st.err = err
	st.cond.Broadcast()
	st.mu.Unlock()
}

// Read reads what the peer sent; io.EOF after its CloseWrite or Close (or
// the error its Close gave).
func (st *Stream) Read(p []byte) (int, error) {
	st.mu.Lock()
	for len(st.buf) == 0 && !st.readEOF && !st.closed && st.err == nil {
		st.cond.Wait()
	}
	if st.closed {
		st.mu.Unlock()
		return 0, net.ErrClosed
	}
	if len(st.buf) == 0 {
		err := st.err
		switch {
		case st.readEOF && st.peerMsg != "":
			err = errors.New(st.peerMsg)
		case st.readEOF:
			err = io.EOF
		}
		st.mu.Unlock()
		return 0, err
	}
	n := copy(p, st.buf)
	st.buf = st.buf[n:]
	if len(st.buf) == 0 {
		st.buf = nil
	}
	st.unacked += n
	var grant int
	// Grant the window back in halves, or all when the buffer is empty, so
	// a small exchange does not wait for a large read.
	if st.unacked >= Window/2 || (len(st.buf) == 0 && st.unacked > 0) {
		grant, st.unacked = st.unacked, 0
	}
	peerClosed := st.peerClosed
	st.mu.Unlock()
	if grant > 0 && !peerClosed {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(grant))
		_ = st.s.writeFrame(frameWindow, st.id, b[:])
	}
	return n, nil
}

// Write sends p, waiting for the peer's window when it is spent.
func (st *Stream) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		st.mu.Lock()
		for st.sendWindow == 0 && !st.closed && !st.wroteEOF && !st.peerClosed && st.err == nil {
			st.cond.Wait()
		}
		var err error
		switch {
		case st.closed:
			err = net.ErrClosed
		case st.wroteEOF:
			err = errors.New("cannot write to a stream after CloseWrite")
		case st.err != nil:
			err = st.err
		case st.peerClosed:
			err = io.ErrClosedPipe
		}
		if err != nil {
			st.mu.Unlock()
			return written, err
		}
		n := min(len(p), st.sendWindow, maxData)
		st.sendWindow -= n
		st.mu.Unlock()
		if err := st.s.writeFrame(frameData, st.id, p[:n]); err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// CloseWrite says this side writes no more: the peer reads EOF.
func (st *Stream) CloseWrite() error {
	st.mu.Lock()
	if st.closed || st.wroteEOF || st.err != nil {
		st.mu.Unlock()
		return nil
	}
	st.wroteEOF = true
	st.cond.Broadcast()
	st.mu.Unlock()
	return st.s.writeFrame(frameCloseWrite, st.id, nil)
}

// Close ends the stream both ways.
func (st *Stream) Close() error { return st.CloseWithError("") }

// CloseWithError ends the stream both ways; the peer's reads fail with msg
// ("": they read EOF).
func (st *Stream) CloseWithError(msg string) error {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return nil
	}
	st.closed = true
	st.buf = nil
	peerClosed, err := st.peerClosed, st.err
	st.cond.Broadcast()
	st.mu.Unlock()
	if peerClosed {
		st.s.forget(st.id)
	}
	if err != nil {
		return nil
	}
	if len(msg) > maxControl {
		msg = msg[:maxControl]
	}
	return st.s.writeFrame(frameClose, st.id, []byte(msg))
}

func (st *Stream) LocalAddr() net.Addr              { return addr{} }
func (st *Stream) RemoteAddr() net.Addr             { return addr{} }
func (st *Stream) SetDeadline(time.Time) error      { return nil }
func (st *Stream) SetReadDeadline(time.Time) error  { return nil }
func (st *Stream) SetWriteDeadline(time.Time) error { return nil }

type addr struct{}

func (addr) Network() string { return "stdiomux" }
func (addr) String() string  { return "stdiomux" }
