package control_test

import (
	"bufio"
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestExecAttach: an attached exec (Upgrade: airlock-stream) carries stdin as
// the command reads it — a line is answered before the next is sent — its
// stdout and stderr apart, then its exit code; on a TTY the output is the
// terminal's and a resize reaches it. It is recorded like any other exec.
func TestExecAttach(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID

	// A conversation: each line read is answered at once.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	s, err := c.ExecAttach(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", `while read l; do echo "got $l"; done; echo bye >&2; exit 5`}}, inR, outW, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(outR)
	for _, w := range []string{"one", "two"} {
		if _, err := io.WriteString(inW, w+"\n"); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() || lines.Text() != "got "+w {
			t.Fatalf("after sending %q: read %q, %v", w, lines.Text(), lines.Err())
		}
	}
	inW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	execID, code, err := s.Wait()
	outW.Close()
	if err != nil || code != 5 || stderr.String() != "bye\n" {
		t.Errorf("attached exec: code %d, stderr %q, %v; want 5 and bye", code, stderr.String(), err)
	}
	rec, err := c.WaitExec(ctx, id, execID)
	if err != nil || rec.ExitCode == nil || *rec.ExitCode != 5 {
		t.Errorf("its record: %+v, %v", rec, err)
	}
	if !slices.ContainsFunc(allEvents(t, c, id), func(ev client.Event) bool { return ev.Kind == "exec.finished" && ev.ExecID == execID }) {
		t.Errorf("no exec.finished for %s", execID)
	}

	// A TTY: the terminal's size as asked with the request, its output on
	// stdout (the stream is handed over on this Unix socket: a resize frame
	// is applied as it comes, so the first size goes with the request).
	var out bytes.Buffer
	ttyIn, ttyW := io.Pipe()
	s, err = c.ExecAttach(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "read x; stty size; echo err >&2"}, TTY: true, Height: 33, Width: 111}, ttyIn, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.WriteString(ttyW, "go\n"); ttyW.Close() }()
	if _, code, err := s.Wait(); err != nil || code != 0 || !strings.Contains(out.String(), "33 111") || !strings.Contains(out.String(), "err") {
		t.Errorf("a TTY exec: code %d, %v, output %q; want 0, the size 33 111 and err on the terminal", code, err, out.String())
	}

	// A TTY without attaching is refused; a missing sandbox is the usual error.
	if _, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"true"}, TTY: true}); apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("tty on an exec that is not attached: %v, want invalid_request", err)
	}
	if _, err := c.ExecAttach(ctx, "no-such-sandbox", &client.ExecRequest{Cmd: []string{"true"}}, nil, nil, nil); apiReason(err) != client.ReasonSandboxNotFound {
		t.Errorf("attached exec in a missing sandbox: %v, want sandbox_not_found", err)
	}
}
