package control_test

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestAttachMain: a run's main command through the daemon (POST
// /v1/sandboxes/{id}/attach, a stream upgrade): attached before the start, it
// gets stdin, its stdout and stderr come apart, a signal frame reaches it and
// its exit code ends the stream. Attached again with replay, the stopped
// sandbox's output comes from where the client had it. A live attach to a
// stopped sandbox is refused.
func TestAttachMain(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 2*time.Minute)
	wm, secrets := e.wire()
	sb, err := c.Create(ctx, &client.CreateRequest{Kind: "run", Manifest: wm, Secrets: secrets, Stdin: true,
		Command: []string{"sh", "-c", `trap 'echo term; exit 9' TERM; read l; echo "got $l"; echo err >&2; echo waiting; while :; do sleep 0.05; done`}})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID
	if _, err := c.WaitEvent(ctx, id, 0, "sandbox.created"); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	s, err := c.AttachMain(ctx, id, &client.AttachRequest{Stdin: true}, inR, outW, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(inW, "hi\n"); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(outR)
	for _, want := range []string{"got hi", "waiting"} {
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("main command's stdout: read %q (%v), want %q", lines.Text(), lines.Err(), want)
		}
	}
	if _, err := c.WaitEvent(ctx, id, 0, "sandbox.ready"); err != nil {
		t.Fatal(err)
	}
	if err := s.Signal("SIGTERM"); err != nil {
		t.Fatal(err)
	}
	var rest bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&rest, outR); close(copied) }()
	_, code, err := s.Wait()
	outW.Close()
	<-copied
	if err != nil || code != 9 || rest.String() != "term\n" || !strings.HasPrefix(stderr.String(), "err\n") {
		t.Fatalf("after SIGTERM: code %d, %v, stdout %q, stderr %q; want 9, term, err", code, err, rest.String(), stderr.String())
	}

	waitState(t, c, id, time.Minute, client.StateStopped)
	var replayOut, replayErr bytes.Buffer
	s, err = c.AttachMain(ctx, id, &client.AttachRequest{Replay: true, SkipStdout: int64(len("got hi\n"))}, nil, &replayOut, &replayErr)
	if err != nil {
		t.Fatal(err)
	}
	if _, code, err := s.Wait(); err != nil || code != 9 || replayOut.String() != "waiting\nterm\n" || replayErr.String() != stderr.String() {
		t.Errorf("replayed after 7 bytes of stdout: code %d, %v, stdout %q, stderr %q; want 9, waiting+term, the same stderr", code, err, replayOut.String(), replayErr.String())
	}

	if _, err := c.AttachMain(ctx, id, &client.AttachRequest{}, nil, nil, nil); apiReason(err) != client.ReasonInvalidState {
		t.Errorf("live attach to a stopped sandbox: %v, want invalid_state", err)
	}
}

// TestAttachMainResumeFrame: a run's sandbox is started by a resume frame on
// its main command's stream (no request of its own): the command's output and
// code come back. A resume frame the daemon refuses (the sandbox runs already)
// ends the stream with the reason.
func TestAttachMainResumeFrame(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 2*time.Minute)
	wm, secrets := e.wire()
	sb, err := c.Create(ctx, &client.CreateRequest{Kind: "run", Manifest: wm, Secrets: secrets,
		Command: []string{"sh", "-c", "echo started-by-frame; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, sb.ID, 0, "sandbox.created"); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	s, err := c.AttachMain(ctx, sb.ID, &client.AttachRequest{}, nil, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, code, err := s.Wait(); err != nil || code != 3 || stdout.String() != "started-by-frame\n" {
		t.Fatalf("started by a resume frame: code %d, %v, stdout %q (stderr %q); want 3, started-by-frame", code, err, stdout.String(), stderr.String())
	}

	up, err := c.Create(ctx, &client.CreateRequest{Kind: "up", Manifest: wm, Secrets: secrets, Start: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Delete(ctxT(t, time.Minute), up.ID) })
	waitState(t, c, up.ID, time.Minute, client.StateReady)
	s, err = c.AttachMain(ctx, up.ID, &client.AttachRequest{}, nil, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Wait(); err == nil || !strings.Contains(err.Error(), "is ready") {
		t.Errorf("a resume frame on a running sandbox's stream: %v, want the refusal", err)
	}
}
