package control_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestExecStream: with Accept: application/x-ndjson an API exec answers with
// its record, its output as it comes (before the command ended), then its exit
// code; stdin from the request reaches the command; bytes that are not UTF-8
// arrive intact; the exec is recorded like any other.
func TestExecStream(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID

	var stdout, stderr bytes.Buffer
	ex, code, err := c.ExecStream(ctx, id, &client.ExecRequest{
		Cmd:   []string{"sh", "-c", `cat; echo err-$FOO >&2; printf '\377\376'; exit 4`},
		Env:   []string{"FOO=bar"},
		Stdin: []byte("from stdin\n"),
	}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if code != 4 || stdout.String() != "from stdin\n\xff\xfe" || stderr.String() != "err-bar\n" {
		t.Errorf("streamed exec: code %d, stdout %q, stderr %q; want 4, %q, %q", code, stdout.String(), stderr.String(), "from stdin\n\xff\xfe", "err-bar\n")
	}
	if ex == nil || ex.ID == "" || ex.Stdout != "" {
		t.Fatalf("the first frame: exec record %+v, want one with an ID and no output file", ex)
	}
	rec, err := c.WaitExec(ctx, id, ex.ID)
	if err != nil || rec.ExitCode == nil || *rec.ExitCode != 4 {
		t.Errorf("the exec's record: %+v, %v; want exit code 4", rec, err)
	}
	evs := allEvents(t, c, id)
	if !slices.ContainsFunc(evs, func(ev client.Event) bool {
		return ev.Kind == "exec.finished" && ev.ExecID == ex.ID && ev.ExitCode != nil && *ev.ExitCode == 4
	}) {
		t.Errorf("no exec.finished with code 4 for %s: %v", ex.ID, kinds(evs))
	}

	// Output comes as it is written: the command prints a line, then waits
	// for a file that the test makes only once it read that line.
	pr, pw := io.Pipe()
	result := make(chan error, 1)
	go func() {
		_, code, err := c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo first; while [ ! -e /tmp/go-on ]; do sleep 0.05; done; echo second"}}, pw, io.Discard)
		if err == nil && code != 0 {
			err = fmt.Errorf("exit code %d", code)
		}
		pw.CloseWithError(err)
		result <- err
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() || lines.Text() != "first" {
		t.Fatalf("the first line of a running exec: %q, %v", lines.Text(), lines.Err())
	}
	if _, code, err := c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"touch", "/tmp/go-on"}}, nil, nil); err != nil || code != 0 {
		t.Fatalf("touch: %d, %v", code, err)
	}
	if !lines.Scan() || lines.Text() != "second" {
		t.Errorf("the second line: %q, %v", lines.Text(), lines.Err())
	}
	if err := <-result; err != nil {
		t.Errorf("the streamed exec: %v", err)
	}

	// stdin is for a streamed exec only.
	if _, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"cat"}, Stdin: []byte("x")}); apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("stdin on an exec with its output in files: %v, want invalid_request", err)
	}
	// A sandbox that is not ready: the usual error, before any frame.
	if _, _, err := c.ExecStream(ctx, "no-such-sandbox", &client.ExecRequest{Cmd: []string{"true"}}, nil, nil); apiReason(err) != client.ReasonSandboxNotFound {
		t.Errorf("streamed exec in a missing sandbox: %v, want sandbox_not_found", err)
	}
	if _, err := c.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}
