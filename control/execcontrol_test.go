package control_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestExecTimeout: an exec with a timeout is ended at expiry (SIGTERM to its
// process group, then SIGKILL after its kill grace for one that ignores
// SIGTERM), ends with 124, its record says timed_out, and its history has
// exec.timed_out then exec.finished (reason timeout); a streamed exec and one
// in the background alike. An exec that ends in time keeps its own code.
func TestExecTimeout(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID

	start := time.Now()
	ex, code, err := c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo up; sleep 30"}, ExecControl: client.ExecControl{Timeout: 1}}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if code != 124 || time.Since(start) > 20*time.Second {
		t.Errorf("a streamed sleep 30 with timeout 1: code %d after %v, want 124 well before 30 s", code, time.Since(start))
	}
	checkTimedOut(t, ctx, c, id, ex.ID)

	// SIGTERM ignored (by the shell and its child): SIGKILL after the grace.
	bg, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "trap '' TERM; sleep 30"}, ExecControl: client.ExecControl{Timeout: 0.5, KillGrace: 1, Background: true}})
	if err != nil {
		t.Fatal(err)
	}
	checkTimedOut(t, ctx, c, id, bg.ID)
	evs := allEvents(t, c, id)
	i := slices.IndexFunc(evs, func(ev client.Event) bool { return ev.Kind == "exec.timed_out" && ev.ExecID == bg.ID })
	if i < 0 || evs[i].Extra["timeout"] != "0.5" || evs[i].Extra["kill_grace"] != "1" {
		t.Errorf("exec.timed_out of %s: %+v", bg.ID, evs)
	}

	// In time: its own code, no timeout.
	_, code, err = c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "exit 3"}, ExecControl: client.ExecControl{Timeout: 30}}, nil, nil)
	if err != nil || code != 3 {
		t.Errorf("an exec that ends before its timeout: %d %v, want 3", code, err)
	}
	// A timeout out of range is refused, naming the field.
	_, err = c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"true"}, ExecControl: client.ExecControl{Timeout: -1}})
	if apiReason(err) != client.ReasonInvalidRequest || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("timeout -1: %v, want invalid_request naming timeout", err)
	}
}

// checkTimedOut waits for exec execID to end and checks it timed out.
func checkTimedOut(t *testing.T, ctx context.Context, c *client.Client, id, execID string) {
	t.Helper()
	rec, err := c.WaitExec(ctx, id, execID)
	if err != nil || rec.ExitCode == nil || *rec.ExitCode != 124 || !rec.TimedOut {
		t.Errorf("the record of a timed-out exec: %+v %v, want exit code 124, timed_out", rec, err)
	}
	evs := allEvents(t, c, id)
	to := slices.IndexFunc(evs, func(ev client.Event) bool { return ev.Kind == "exec.timed_out" && ev.ExecID == execID })
	fin := slices.IndexFunc(evs, func(ev client.Event) bool { return ev.Kind == "exec.finished" && ev.ExecID == execID })
	if to < 0 || fin < to || evs[fin].Reason != "timeout" || evs[fin].ExitCode == nil || *evs[fin].ExitCode != 124 {
		t.Errorf("events of a timed-out exec: timed_out at %d, finished at %d: %v", to, fin, kinds(evs))
	}
}

// TestExecSignalListOutput: a background exec answers at once; its output is
// read from any byte and followed until it ends; a signal reaches its process
// group (the shell's trap runs); the list shows it running, then ended. A
// signal to an ended exec is invalid_state, a bad signal invalid_request, an
// unknown exec exec_not_found; a streamed exec has no output to read later.
func TestExecSignalListOutput(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID

	ex, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.1; done"}, ExecControl: client.ExecControl{Background: true}})
	if err != nil {
		t.Fatal(err)
	}
	if ex.ExitCode != nil {
		t.Fatalf("a background exec's answer: %+v, want it running", ex)
	}
	out, err := c.ExecOutput(ctx, id, ex.ID, client.OutputStdout, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the followed output: %q %v", lines.Text(), lines.Err())
	}
	list, err := c.ListExecs(ctx, id, true, 0)
	if err != nil || !slices.ContainsFunc(list, func(x client.Exec) bool { return x.ID == ex.ID && x.ExitCode == nil }) {
		t.Errorf("running execs: %+v %v, want %s among them", list, err, ex.ID)
	}
	if _, err := c.SignalExec(ctx, id, ex.ID, "NOSUCH"); apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("a bad signal: %v, want invalid_request", err)
	}
	if _, err := c.SignalExec(ctx, id, "no-such-exec", "TERM"); apiReason(err) != client.ReasonExecNotFound {
		t.Errorf("an unknown exec: %v, want exec_not_found", err)
	}
	if _, err := c.SignalExec(ctx, id, ex.ID, "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	// The follow ends with the exec.
	rest, err := io.ReadAll(out)
	if err != nil || !strings.Contains(string(rest), "got-term") {
		t.Errorf("the rest of the followed output: %q %v", rest, err)
	}
	rec, err := c.WaitExec(ctx, id, ex.ID)
	if err != nil || rec.ExitCode == nil || *rec.ExitCode != 7 {
		t.Errorf("after SIGTERM: %+v %v, want exit code 7 (the trap)", rec, err)
	}
	// Read again from a byte offset: "ready\n" is 6 bytes.
	again, err := c.ExecOutput(ctx, id, ex.ID, client.OutputStdout, 6, true)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(again)
	again.Close()
	if string(b) != "got-term\n" {
		t.Errorf("output from byte 6: %q, want %q", b, "got-term\n")
	}
	if _, err := c.SignalExec(ctx, id, ex.ID, "TERM"); apiReason(err) != client.ReasonInvalidState {
		t.Errorf("a signal to an ended exec: %v, want invalid_state", err)
	}
	list, err = c.ListExecs(ctx, id, false, 0)
	if err != nil || len(list) == 0 || list[len(list)-1].ID != ex.ID || list[len(list)-1].ExitCode == nil {
		t.Errorf("all execs: %+v %v, want %s last, ended", list, err, ex.ID)
	}
	if list, err := c.ListExecs(ctx, id, true, 0); err != nil || slices.ContainsFunc(list, func(x client.Exec) bool { return x.ID == ex.ID }) {
		t.Errorf("running execs after its end: %+v %v", list, err)
	}
	streamed, _, err := c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"true"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecOutput(ctx, id, streamed.ID, client.OutputStdout, 0, false); apiReason(err) != client.ReasonInvalidState {
		t.Errorf("the output of a streamed exec: %v, want invalid_state", err)
	}
	if list, err := c.ListExecs(ctx, id, false, 1); err != nil || len(list) != 1 || list[0].ID != streamed.ID {
		t.Errorf("the last exec: %+v %v, want %s", list, err, streamed.ID)
	}
}

// TestExecSignalAtOnce: a background exec signalled as soon as its create
// answered gets the signal (the daemon's answer came before the exec's process
// had recorded itself in the sandbox: the signal failed, "no record of its
// process", and the exec ran on).
func TestExecSignalAtOnce(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID
	for i := range 8 {
		ex, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"sleep", "300"}, ExecControl: client.ExecControl{Background: true}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.SignalExec(ctx, id, ex.ID, "KILL"); err != nil {
			t.Fatalf("exec %d signalled at once: %v", i, err)
		}
		rec, err := c.WaitExec(ctx, id, ex.ID)
		if err != nil || rec.ExitCode == nil || *rec.ExitCode != 137 {
			t.Fatalf("exec %d after SIGKILL: %+v %v, want exit code 137", i, rec, err)
		}
	}
}

// TestExecClientGone: a streamed exec and an attached one whose client goes
// away are killed, their processes gone from the sandbox within seconds, and
// their ends recorded; a background one runs on. An attached client's signal
// frame reaches its command.
func TestExecClientGone(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID

	running := func(marker string) bool {
		t.Helper()
		var out strings.Builder
		if _, _, err := c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"ps", "-o", "args"}}, &out, os.Stderr); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(out.String(), marker)
	}
	gone := func(what, marker, execID string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for running(marker) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %q still runs in the sandbox after its client went away", what, marker)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if rec, err := c.WaitExec(ctx, id, execID); err != nil || rec.ExitCode == nil {
			t.Errorf("%s: record %+v %v, want its end", what, rec, err)
		}
	}

	// Streamed (NDJSON): the client stops reading and closes.
	sctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	started := make(chan *client.Exec, 1)
	go func() {
		ex, _, _ := c.ExecStream(sctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo up; sleep 301"}}, pw, io.Discard)
		started <- ex
		pw.Close()
	}()
	if l, err := bufio.NewReader(pr).ReadString('\n'); l != "up\n" {
		t.Fatalf("streamed: %q %v", l, err)
	}
	if !running("sleep 301") {
		t.Fatal("the streamed sleep 301 does not run")
	}
	cancel()
	ex := <-started
	gone("a streamed exec", "sleep 301", ex.ID)

	// Attached: the session is closed.
	apr, apw := io.Pipe()
	sess, err := c.ExecAttach(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo up; sleep 302"}}, nil, apw, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(apr).ReadString('\n'); l != "up\n" {
		t.Fatalf("attached: %q %v", l, err)
	}
	list, err := c.ListExecs(ctx, id, true, 0)
	if err != nil || len(list) != 1 {
		t.Fatalf("running execs: %+v %v, want the attached one", list, err)
	}
	sess.Close()
	apw.Close()
	gone("an attached exec", "sleep 302", list[0].ID)

	// An attached client's signal frame reaches the command's process group.
	spr, spw := io.Pipe()
	sig, err := c.ExecAttach(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "trap 'exit 5' TERM; echo up; while :; do sleep 0.1; done"}}, nil, spw, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(spr).ReadString('\n'); l != "up\n" {
		t.Fatalf("attached: %q %v", l, err)
	}
	go func() { _, _ = io.Copy(io.Discard, spr) }()
	if err := sig.Signal("TERM"); err != nil {
		t.Fatal(err)
	}
	if _, code, err := sig.Wait(); err != nil || code != 5 {
		t.Errorf("an attached exec sent SIGTERM: %d %v, want 5 (its trap)", code, err)
	}
	spw.Close()

	// A background exec outlives the request that started it.
	bg, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"sleep", "303"}, ExecControl: client.ExecControl{Background: true}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if !running("sleep 303") {
		t.Error("a background exec does not run on")
	}
	if _, err := c.SignalExec(ctx, id, bg.ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	gone("a killed background exec", "sleep 303", bg.ID)
}
