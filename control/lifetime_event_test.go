package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestLifetimeChangedEvent: each PATCH of a sandbox's lifetime is in its
// history, sandbox.lifetime_changed, with the fields the request gave and the
// lifetime that results; a refused PATCH records nothing.
func TestLifetimeChangedEvent(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 3*time.Minute)

	sb := e.createReady(ctx, c, "")
	before, err := c.Get(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.SetTimeout(ctx, sb.ID, 10*time.Minute, "stop")
	if err != nil {
		t.Fatal(err)
	}
	ev := waitKind(t, c, sb.ID, before.LastSeq, "sandbox.lifetime_changed")
	if ev.Extra["changed"] != "timeout,on_timeout" || ev.Extra["timeout"] != "600" || ev.Extra["on_timeout"] != "stop" ||
		got.ExpiresAt == nil || ev.Extra["expires_at"] != got.ExpiresAt.UTC().Format(time.RFC3339Nano) {
		t.Errorf("sandbox.lifetime_changed after SetTimeout(10m, stop): %+v (record expires_at %v)", ev.Extra, got.ExpiresAt)
	}
	if ev.State != client.StateReady {
		t.Errorf("sandbox.lifetime_changed has state %q, want ready", ev.State)
	}
	if got.LastSeq != ev.Sequence {
		t.Errorf("the PATCH answered last_seq %d, want its event's %d", got.LastSeq, ev.Sequence)
	}

	idle, policy := 90.0, "stop"
	if _, err := c.Update(ctx, sb.ID, &client.UpdateRequest{IdleTimeout: &idle, OnIdle: &policy}); err != nil {
		t.Fatal(err)
	}
	ev = waitKind(t, c, sb.ID, ev.Sequence, "sandbox.lifetime_changed")
	if ev.Extra["changed"] != "idle_timeout,on_idle" || ev.Extra["idle_timeout"] != "90" || ev.Extra["on_idle"] != "stop" ||
		ev.Extra["expires_at"] == "" || ev.Extra["on_timeout"] != "stop" {
		t.Errorf("sandbox.lifetime_changed after an idle timeout: %+v", ev.Extra)
	}

	zero := 0.0
	if _, err := c.Update(ctx, sb.ID, &client.UpdateRequest{Timeout: &zero}); err != nil {
		t.Fatal(err)
	}
	ev = waitKind(t, c, sb.ID, ev.Sequence, "sandbox.lifetime_changed")
	if ev.Extra["changed"] != "timeout" || ev.Extra["timeout"] != "0" {
		t.Errorf("sandbox.lifetime_changed after a cleared deadline: %+v", ev.Extra)
	}
	if _, ok := ev.Extra["expires_at"]; ok {
		t.Errorf("a cleared deadline still shows in sandbox.lifetime_changed: %+v", ev.Extra)
	}

	// A refused change is not in the history.
	bad := "pause-later"
	last, _ := c.Get(ctx, sb.ID)
	if _, err := c.Update(ctx, sb.ID, &client.UpdateRequest{OnIdle: &bad}); apiReason(err) != client.ReasonInvalidRequest {
		t.Fatalf("on_idle %q: %v, want invalid_request", bad, err)
	}
	if cur, _ := c.Get(ctx, sb.ID); cur.LastSeq != last.LastSeq {
		t.Errorf("a refused PATCH recorded events:\n%s", dumpEvents(c, sb.ID))
	}

	if _, err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, sb.ID, 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// waitKind waits (10 s at most) for the first event of kind after from.
func waitKind(t *testing.T, c *client.Client, id string, from uint64, kind string) client.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := c.WaitEvent(ctx, id, from, kind)
	if err != nil || ev.Kind != kind {
		t.Fatalf("sandbox %s: no %s after %d: %v\nevents:\n%s", id, kind, from, err, dumpEvents(c, id))
	}
	return ev
}
