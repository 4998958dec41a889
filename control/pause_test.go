package control_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// pauseManifest: a daemon that keeps a counter in its shell's memory and
// writes it out every 50 ms (/tmp/counter, and a line to /tmp/ticks), one
// that exits when /tmp/boom appears (its end is reported through the status
// stream), and a service that ticks too.
const pauseManifest = `
[sandbox]
image = "{{image}}"

[daemons.counter]
command = ["sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; echo $i >> /tmp/ticks; sleep 0.05; done"]
timeout = 2

[daemons.trigger]
command = ["sh", "-c", "while [ ! -e /tmp/boom ]; do sleep 0.05; done; rm -f /tmp/boom; exit 3"]
timeout = 2

[services.svc]
image = "{{image}}"
command = ["sh", "-c", "exec sleep 1000"]
`

// readCounter reads /tmp/counter of sandbox id (through the files API, which
// reads a paused sandbox too) and the size of /tmp/ticks.
func readCounter(t *testing.T, c *client.Client, id string) (counter, ticks int) {
	t.Helper()
	read := func(p string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rc, err := c.ReadFile(ctx, id, p)
		if apiReason(err) == client.ReasonPathNotFound {
			return "0" // not written yet
		}
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	n, err := strconv.Atoi(strings.TrimSpace(read("/tmp/counter")))
	if err != nil {
		t.Fatalf("/tmp/counter: %v", err)
	}
	return n, len(read("/tmp/ticks"))
}

// frozen reports the Engine's Paused flag of each container of sandbox id,
// by role (primary, service).
func (e *env) frozen(id string) map[string]bool {
	e.t.Helper()
	list, err := e.docker.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "dev.airlock.sandbox="+id))})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, ct := range list {
		role := ct.Labels["dev.airlock.role"]
		if role != "primary" && role != "service" {
			continue
		}
		in, err := e.docker.ContainerInspect(context.Background(), ct.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		out[role] = in.State.Paused
	}
	return out
}

// daemonPID is the PID of the last daemon.started of daemon name.
func daemonPID(t *testing.T, c *client.Client, id, name string) (pid, starts int) {
	t.Helper()
	for _, ev := range allEvents(t, c, id) {
		if ev.Kind == "daemon.started" && ev.Daemon == name {
			pid, starts = ev.PID, starts+1
		}
	}
	return pid, starts
}

// TestPause: a paused sandbox's primary and service are frozen (the Engine
// says so) and its daemon makes no progress; exec, attach and file writes are
// refused with a 409 that says it is paused, reads are not; unpaused, the
// daemon goes on from its counter with the same PID, the status stream is
// still followed, and a paused sandbox stops gracefully (its daemons stopped
// by the supervisor, not killed) and is deleted with nothing left.
func TestPause(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeManifest(pauseManifest)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 3*time.Minute)

	sb := e.createReady(ctx, c, "")
	id := sb.ID
	for deadline := time.Now().Add(20 * time.Second); ; {
		if n, _ := readCounter(t, c, id); n >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the counter daemon did not count")
		}
		time.Sleep(100 * time.Millisecond)
	}
	pid, _ := daemonPID(t, c, id, "counter")

	paused, err := c.Pause(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if paused.State != client.StatePaused {
		t.Fatalf("pause answered state %s, want paused", paused.State)
	}
	if ev, err := c.WaitEvent(ctx, id, 0, "sandbox.paused"); err != nil || ev.State != client.StatePaused {
		t.Fatalf("no sandbox.paused event: %v %+v", err, ev)
	}
	if got := e.frozen(id); !got["primary"] || !got["service"] {
		t.Fatalf("the Engine's paused flags after a pause: %v, want primary and service paused", got)
	}
	n1, t1 := readCounter(t, c, id)
	time.Sleep(600 * time.Millisecond)
	n2, t2 := readCounter(t, c, id)
	if n1 != n2 || t1 != t2 {
		t.Fatalf("a paused daemon made progress: counter %d then %d, ticks %d then %d bytes", n1, n2, t1, t2)
	}
	if got, _ := c.Get(ctx, id); got.State != client.StatePaused {
		t.Fatalf("a paused sandbox is %s after 600 ms", got.State)
	}

	// Refused while paused, each a 409 that says so.
	refused := func(what string, err error) {
		t.Helper()
		var ce *client.Error
		if err == nil {
			t.Errorf("%s in a paused sandbox succeeded", what)
			return
		}
		if !strings.Contains(err.Error(), "paused") || !errors.As(err, &ce) || ce.Status != http.StatusConflict || ce.Reason != client.ReasonInvalidState {
			t.Errorf("%s in a paused sandbox: %v, want a 409 invalid_state that says it is paused", what, err)
		}
	}
	_, err = c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"true"}})
	refused("an exec", err)
	_, _, err = c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"true"}}, io.Discard, io.Discard)
	refused("a streamed exec", err)
	_, err = c.AttachMain(ctx, id, &client.AttachRequest{}, nil, io.Discard, io.Discard)
	refused("an attach", err)
	refused("a file written", c.WriteFile(ctx, id, "/tmp/x", strings.NewReader("x"), 0o644))
	if _, err := c.Resume(ctx, id, nil); apiReason(err) != client.ReasonInvalidState {
		t.Errorf("POST …/resume of a paused sandbox: %v, want invalid_state", err)
	}
	// Paused again: as it is.
	if again, err := c.Pause(ctx, id); err != nil || again.State != client.StatePaused {
		t.Errorf("a second pause: %v, state %v", err, again)
	}

	unpaused, err := c.Unpause(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if unpaused.State != client.StateReady {
		t.Fatalf("unpause answered state %s, want ready", unpaused.State)
	}
	if got := e.frozen(id); got["primary"] || got["service"] {
		t.Fatalf("the Engine's paused flags after an unpause: %v", got)
	}
	time.Sleep(500 * time.Millisecond)
	n3, _ := readCounter(t, c, id)
	if n3 <= n2 {
		t.Fatalf("after the unpause the counter is %d, was %d when paused: want it to go on from there", n3, n2)
	}
	if pid2, starts := daemonPID(t, c, id, "counter"); pid2 != pid || starts != 1 {
		t.Fatalf("the counter daemon: pid %d (%d starts), was %d: it restarted", pid2, starts, pid)
	}
	res, code, err := c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "kill -0 " + strconv.Itoa(pid) + " && touch /tmp/boom"}}, io.Discard, io.Discard)
	if err != nil || code != 0 {
		t.Fatalf("exec after the unpause: %v, exit %d (%+v)", err, code, res)
	}
	// The status stream is still followed: the trigger daemon's exit is recorded.
	if ev, err := c.WaitEvent(ctx, id, unpaused.LastSeq, "daemon.exited"); err != nil || ev.Daemon != "trigger" {
		t.Fatalf("the trigger daemon's exit after the unpause: %v %+v\n%s", err, ev, dumpEvents(c, id))
	}

	// A paused sandbox stops: its supervisor stops the daemons (thawed first).
	if _, err := c.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Get(ctx, id)
	if _, err := c.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	stopped, ev := waitState(t, c, id, time.Minute, client.StateStopped, client.StateFailed)
	if stopped.State != client.StateStopped || ev.Reason != "stopped" {
		t.Fatalf("a paused sandbox stopped: %s (%s)\n%s", stopped.State, ev.Reason, dumpEvents(c, id))
	}
	evs, _ := readEvents(c, id, before.LastSeq)
	graceful := false
	for _, ev := range evs {
		graceful = graceful || (ev.Kind == "daemon.stopped" && ev.Daemon == "counter")
	}
	if !graceful {
		t.Errorf("the stop of a paused sandbox did not stop its daemons gracefully\n%s", dumpEvents(c, id))
	}
	if _, err := c.Pause(ctx, id); apiReason(err) != client.ReasonInvalidState || !strings.Contains(err.Error(), "only a ready sandbox") {
		t.Errorf("pause of a stopped sandbox: %v, want invalid_state", err)
	}

	// Started again and paused, it is deleted with nothing left.
	resumed, err := c.Resume(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitNext(t, c, id, resumed.LastSeq, "sandbox.ready")
	if _, err := c.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, time.Minute, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, "dev.airlock.sandbox", id)
}

// TestPauseClocksRun: a paused sandbox's deadline and idle clock run: one
// with an idle timeout is stopped once idle that long though paused, one
// with a timeout is deleted at its deadline though paused.
func TestPauseClocksRun(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 3*time.Minute)

	idle, err := c.Create(ctx, e.withLifetime(client.LifetimeRequest{IdleTimeout: 3, OnIdle: "stop"}))
	if err != nil {
		t.Fatal(err)
	}
	deadline, err := c.Create(ctx, e.withLifetime(client.LifetimeRequest{Timeout: 12}))
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, idle.ID)
	waitReady(t, c, deadline.ID)
	for _, id := range []string{idle.ID, deadline.ID} {
		if _, err := c.Pause(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	sb, _ := waitState(t, c, idle.ID, 30*time.Second, client.StateStopped, client.StateFailed)
	if sb.State != client.StateStopped {
		t.Fatalf("a paused sandbox idle for its idle timeout is %s\n%s", sb.State, dumpEvents(c, idle.ID))
	}
	assertExpired(t, c, idle.ID, "idle_timeout", "stop")
	waitState(t, c, deadline.ID, 30*time.Second, client.StateDeleted)
	assertExpired(t, c, deadline.ID, "timeout", "delete")
	testenv.AssertNoLeftovers(t, e.docker, "dev.airlock.sandbox", deadline.ID)
	if _, err := c.Delete(ctx, idle.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, idle.ID, 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// TestPauseOnIdle: on_idle "pause" pauses a sandbox idle for its idle timeout
// (sandbox.expired with policy pause, then sandbox.paused with reason
// idle_timeout) and leaves it paused; unpaused, its idle clock starts again
// and it is paused again. on_timeout "pause" is refused.
func TestPauseOnIdle(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 3*time.Minute)

	if _, err := c.Create(ctx, e.withLifetime(client.LifetimeRequest{Timeout: 60, OnTimeout: "pause"})); apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("on_timeout pause: %v, want invalid_request", err)
	}
	sb, err := c.Create(ctx, e.withLifetime(client.LifetimeRequest{IdleTimeout: 2, OnIdle: client.OnExpiryPause}))
	if err != nil {
		t.Fatal(err)
	}
	if sb.OnIdle != client.OnExpiryPause {
		t.Errorf("the record's on_idle: %q, want pause", sb.OnIdle)
	}
	waitReady(t, c, sb.ID)
	pausedAfter := func(from uint64) client.Event {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		ev, err := c.WaitEvent(wctx, sb.ID, from, "sandbox.paused", "sandbox.stopped", "sandbox.failed", "sandbox.deleting")
		if err != nil || ev.Kind != "sandbox.paused" {
			t.Fatalf("an idle sandbox with on_idle pause: %s %v, want sandbox.paused\n%s", ev.Kind, err, dumpEvents(c, sb.ID))
		}
		if ev.Reason != "idle_timeout" {
			t.Errorf("sandbox.paused of an idle sandbox: reason %q, want idle_timeout", ev.Reason)
		}
		evs, _ := readEvents(c, sb.ID, from)
		i := indexOf(evs, "sandbox.expired")
		if i < 0 || evs[i].Reason != "idle_timeout" || evs[i].Extra["policy"] != "pause" || evs[i].Sequence > ev.Sequence {
			t.Errorf("no sandbox.expired (idle_timeout, pause) before sandbox.paused\n%s", dumpEvents(c, sb.ID))
		}
		return ev
	}
	first := pausedAfter(0)
	// It stays paused: the next rounds of the reaper leave it so.
	time.Sleep(5 * time.Second)
	got, _ := c.Get(ctx, sb.ID)
	if got.State != client.StatePaused || got.LastSeq != first.Sequence {
		t.Fatalf("an idle-paused sandbox 5 s later: %s, last event %d (paused at %d)\n%s", got.State, got.LastSeq, first.Sequence, dumpEvents(c, sb.ID))
	}
	unpaused, err := c.Unpause(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	pausedAfter(unpaused.LastSeq)
	if _, err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, sb.ID, 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}
