package stdiomux

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// pair is a client and a server session over a pipe; the server echoes
// nothing by itself.
func pair(t *testing.T) (*Session, *Session, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	c, s := Client(a), Server(b)
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s, a
}

// echo accepts the server's streams and copies each back to itself until
// EOF, then closes it.
func echo(s *Session) {
	for {
		st, err := s.Accept()
		if err != nil {
			return
		}
		go func() {
			_, _ = io.Copy(st, st)
			_ = st.CloseWrite()
			_ = st.Close()
		}()
	}
}

func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not end within %v", what, d)
	}
}

// Many streams at once, each with more than a window of data, arrive whole
// and apart.
func TestManyStreams(t *testing.T) {
	c, s, _ := pair(t)
	go echo(s)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.Open()
			if err != nil {
				errs <- err
				return
			}
			defer st.Close()
			want := make([]byte, Window+1000*i+7)
			_, _ = rand.Read(want)
			go func() {
				_, _ = st.Write(want)
				_ = st.CloseWrite()
			}()
			got, err := io.ReadAll(st)
			if err != nil || !bytes.Equal(got, want) {
				errs <- fmt.Errorf("stream %d: %d of %d bytes back, %v", i, len(got), len(want), err)
			}
		}()
	}
	within(t, 60*time.Second, "50 echoed streams", wg.Wait)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A half-closed stream still carries the answer the other way.
func TestHalfClose(t *testing.T) {
	c, s, _ := pair(t)
	go func() {
		st, err := s.Accept()
		if err != nil {
			return
		}
		req, _ := io.ReadAll(st) // until the client's CloseWrite
		_, _ = st.Write([]byte("answer to " + string(req)))
		_ = st.Close()
	}()
	st, err := c.Open()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("question")); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("more")); err == nil {
		t.Error("a write after CloseWrite succeeded")
	}
	var got []byte
	within(t, 10*time.Second, "the answer", func() { got, err = io.ReadAll(st) })
	if err != nil || string(got) != "answer to question" {
		t.Errorf("answer %q, %v", got, err)
	}
}

// A stream nobody reads stops its writer only: the others go on.
func TestUnreadStreamBlocksNoOther(t *testing.T) {
	c, s, _ := pair(t)
	flooded := make(chan int, 1)
	go func() {
		first, err := s.Accept()
		if err != nil {
			return
		}
		go func() {
			// The client never reads this one: the writes stop at the window.
			n, _ := first.Write(make([]byte, 4*Window))
			flooded <- n
		}()
		echo(s)
	}()
	unread, err := c.Open()
	if err != nil {
		t.Fatal(err)
	}
	_, _ = unread.Write([]byte("x")) // the server accepts it first
	time.Sleep(100 * time.Millisecond)
	within(t, 10*time.Second, "an echo beside an unread stream", func() {
		for i := range 5 {
			st, err := c.Open()
			if err != nil {
				t.Error(err)
				return
			}
			msg := bytes.Repeat([]byte{byte('a' + i)}, 3*Window)
			go func() { _, _ = st.Write(msg); _ = st.CloseWrite() }()
			got, err := io.ReadAll(st)
			if err != nil || !bytes.Equal(got, msg) {
				t.Errorf("echo %d beside an unread stream: %d bytes, %v", i, len(got), err)
			}
			st.Close()
		}
	})
	select {
	case n := <-flooded:
		t.Errorf("the writer of the unread stream wrote %d bytes: the window did not hold it", n)
	default:
	}
	// Reading it lets its writer finish.
	within(t, 10*time.Second, "reading the flooded stream", func() {
		if _, err := io.ReadFull(unread, make([]byte, 4*Window)); err != nil {
			t.Error(err)
		}
	})
	if n := <-flooded; n != 4*Window {
		t.Errorf("flooded writer wrote %d", n)
	}
}

// failingConn is the client's end of a command that died: its reads end
// with what the command said.
type failingConn struct {
	net.Conn
	mu  sync.Mutex
	err error
}

func (f *failingConn) Read(p []byte) (int, error) {
	n, err := f.Conn.Read(p)
	if err != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.err != nil {
			return n, f.err
		}
	}
	return n, err
}

// The remote's end ends every stream, reads and writes, with the
// connection's error (which names what ssh said).
func TestRemoteDiesEndsEveryStream(t *testing.T) {
	a, b := net.Pipe()
	fc := &failingConn{Conn: a}
	c, s := Client(fc), Server(b)
	defer c.Close()
	var streams []*Stream
	for range 3 {
		st, err := c.Open()
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	for range 3 {
		if _, err := s.Accept(); err != nil {
			t.Fatal(err)
		}
	}
	fc.mu.Lock()
	fc.err = fmt.Errorf("%w: ssh: connect to host box port 22: Connection refused", io.ErrUnexpectedEOF)
	fc.mu.Unlock()
	s.Close() // the remote command dies
	for i, st := range streams {
		var err error
		within(t, 5*time.Second, "a read after the remote died", func() { _, err = st.Read(make([]byte, 10)) })
		if err == nil || !strings.Contains(err.Error(), "Connection refused") || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("stream %d read: %v, want ssh's error", i, err)
		}
		if _, err := st.Write([]byte("x")); err == nil || !strings.Contains(err.Error(), "Connection refused") {
			t.Errorf("stream %d write: %v, want ssh's error", i, err)
		}
	}
	if _, err := c.Open(); err == nil || !strings.Contains(err.Error(), "Connection refused") {
		t.Errorf("open after the remote died: %v", err)
	}
	<-c.Done()
}

// A writer waiting for the window when the remote dies gets the error too.
func TestBlockedWriterEndsWithSession(t *testing.T) {
	c, s, a := pair(t)
	go func() { _, _ = s.Accept() }() // accepted, never read
	st, err := c.Open()
	if err != nil {
		t.Fatal(err)
	}
	werr := make(chan error, 1)
	go func() { _, err := st.Write(make([]byte, 2*Window)); werr <- err }()
	time.Sleep(100 * time.Millisecond)
	a.Close()
	select {
	case err := <-werr:
		if err == nil {
			t.Error("the blocked write succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked write did not end with the connection")
	}
}

// Close with a message: the peer's reads fail with it after what came before.
func TestCloseWithError(t *testing.T) {
	c, s, _ := pair(t)
	go func() {
		st, err := s.Accept()
		if err != nil {
			return
		}
		_, _ = st.Write([]byte("partial"))
		_ = st.CloseWithError("cannot reach the daemon")
	}()
	st, err := c.Open()
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(st)
	if string(got) != "partial" || err == nil || err.Error() != "cannot reach the daemon" {
		t.Errorf("got %q, %v", got, err)
	}
	// Both sides closed: the stream is forgotten.
	st.Close()
	time.Sleep(50 * time.Millisecond)
	c.mu.Lock()
	left := len(c.streams)
	c.mu.Unlock()
	if left != 0 {
		t.Errorf("%d streams left in the client's session", left)
	}
}
