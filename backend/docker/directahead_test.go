package docker

import (
	"bufio"
	"context"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
)

// aheadEngine attaches to an exec over a Unix socket whose first bytes its
// client read with the answer (they are in the reader, not the socket).
// Every other call panics.
type aheadEngine struct {
	client.APIClient
	conn *net.UnixConn
}

func (e *aheadEngine) ContainerExecCreate(context.Context, string, container.ExecOptions) (container.ExecCreateResponse, error) {
	return container.ExecCreateResponse{ID: "exec"}, nil
}

func (e *aheadEngine) ContainerExecAttach(context.Context, string, container.ExecAttachOptions) (types.HijackedResponse, error) {
	r := bufio.NewReader(e.conn)
	if _, err := r.Peek(len("early")); err != nil { // read ahead, as with the answer
		return types.HijackedResponse{}, err
	}
	return types.HijackedResponse{Conn: e.conn, Reader: r}, nil
}

// ContainerExecInspect says the exec ended (the handed-over exec's end is
// asked of the Engine once a second).
func (e *aheadEngine) ContainerExecInspect(context.Context, string) (container.ExecInspect, error) {
	return container.ExecInspect{}, nil
}

// TestDirectExecKeepsOutputReadAhead: a terminal exec handed over raw keeps
// the output its Engine client read with the attach's answer (it was lost: the
// command's first output, under load on Engine 29).
func TestDirectExecKeepsOutputReadAhead(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := theirs.Write([]byte("early")); err != nil {
		t.Fatal(err)
	}
	e := &aheadEngine{conn: fc.(*net.UnixConn)}
	ex, err := (&Runtime{Engine: e}).Exec(context.Background(), &backend.Sandbox{ID: "s", PrimaryID: "c"},
		backend.ExecRequest{Cmd: []string{"sh"}, TTY: true, Stdin: true, Direct: true}, backend.Streams{})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Direct == nil {
		t.Fatal("the stream was not handed over")
	}
	defer ex.Direct.Close()
	defer func() { ex.EndDirect(); <-ex.Done }()
	if string(ex.DirectAhead) != "early" {
		t.Errorf("output read ahead with the answer: %q, want %q", ex.DirectAhead, "early")
	}
}
