package docker

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"testing"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// droppingEngine drops the connection of its first attach ("unexpected EOF",
// as an Engine under load did in a test run); its execs print "hi" and exit
// 0. started says what an inspect of the dropped exec tells. Every other call
// panics.
type droppingEngine struct {
	client.APIClient
	started        bool
	creates, drops int
}

func (e *droppingEngine) ContainerExecCreate(context.Context, string, container.ExecOptions) (container.ExecCreateResponse, error) {
	e.creates++
	return container.ExecCreateResponse{ID: "exec"}, nil
}

func (e *droppingEngine) ContainerExecAttach(context.Context, string, container.ExecAttachOptions) (types.HijackedResponse, error) {
	if e.drops == 0 {
		e.drops++
		return types.HijackedResponse{}, io.ErrUnexpectedEOF
	}
	ours, theirs := net.Pipe()
	go func() {
		_, _ = stdcopy.NewStdWriter(theirs, stdcopy.Stdout).Write([]byte("hi\n"))
		theirs.Close()
	}()
	return types.HijackedResponse{Conn: ours, Reader: bufio.NewReader(ours)}, nil
}

func (e *droppingEngine) ContainerExecInspect(context.Context, string) (container.ExecInspect, error) {
	if e.started && e.creates == 1 {
		return container.ExecInspect{Running: true, Pid: 42}, nil
	}
	return container.ExecInspect{}, nil
}

// TestExecInAgainAfterADroppedAttach: an exec whose attach's connection the
// Engine dropped before it started is made again and runs once (a file
// operation failed "unexpected EOF" under load); one the Engine may have
// started is not run twice: the error stands.
func TestExecInAgainAfterADroppedAttach(t *testing.T) {
	e := &droppingEngine{}
	var out bytes.Buffer
	code, err := execChannel{engine: e}.ExecIn(context.Background(), "c", []string{"true"}, nil, &out, io.Discard)
	if err != nil || code != 0 || out.String() != "hi\n" || e.creates != 2 {
		t.Errorf("after a dropped attach: code %d, %v, output %q, %d creates; want 0, the output, 2 creates", code, err, out.String(), e.creates)
	}
	started := &droppingEngine{started: true}
	if _, err := (execChannel{engine: started}).ExecIn(context.Background(), "c", []string{"true"}, nil, io.Discard, io.Discard); err == nil || started.creates != 1 {
		t.Errorf("a dropped attach of an exec that started: %v after %d creates; want the error after 1", err, started.creates)
	}
}
