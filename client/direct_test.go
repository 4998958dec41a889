package client

import (
	"io"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDirectCloseAfterRelease (control.TestFiles under make test's load: its
// connections to the in-process daemon ended with EOF, twice): an attached
// terminal's handed-over stream, once its reader released the descriptor,
// was still shut down by the session's Close, on the number alone. The
// process had reused that number for another socket meanwhile (one of its
// HTTP connections), and that one was cut. A stream released is never
// touched again.
func TestDirectCloseAfterRelease(t *testing.T) {
	pair := func() [2]int {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fds
	}
	handed := pair()
	ds := &directStream{fd: handed[0]}
	unix.Close(handed[1]) // the terminal's end: its output ends
	if _, err := io.Copy(io.Discard, ds); err != nil {
		t.Fatal(err)
	}
	ds.release()

	// The lowest free number is taken first: the released one.
	other := pair()
	defer unix.Close(other[0])
	defer unix.Close(other[1])
	if other[0] != ds.fd && other[1] != ds.fd {
		t.Fatalf("the released descriptor %d was not reused (got %v): the test cannot show the fault", ds.fd, other)
	}
	if err := ds.Close(); err != nil {
		t.Errorf("Close after release: %v", err)
	}
	if _, err := ds.Write([]byte("x")); err == nil {
		t.Error("a write after release went through")
	}
	// The other socket still carries data both ways.
	for _, dir := range [][2]int{{other[0], other[1]}, {other[1], other[0]}} {
		if _, err := unix.Write(dir[0], []byte("ok")); err != nil {
			t.Fatalf("the socket that reused the number: write: %v", err)
		}
		buf := make([]byte, 2)
		if n, err := unix.Read(dir[1], buf); err != nil || string(buf[:n]) != "ok" {
			t.Fatalf("the socket that reused the number: read %q, %v; want ok", buf[:n], err)
		}
	}
}
