package control_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// withLifetime is an up request with a lifetime.
func (e *env) withLifetime(lt client.LifetimeRequest) *client.CreateRequest {
	req := e.upRequest("")
	req.LifetimeRequest = lt
	return req
}

// assertExpired checks a sandbox's history: sandbox.expired (reason, policy)
// before the end its policy makes, which carries the same reason.
func assertExpired(t *testing.T, c *client.Client, id, reason, policy string) {
	t.Helper()
	evs := allEvents(t, c, id)
	i := indexOf(evs, "sandbox.expired")
	if i < 0 {
		t.Fatalf("sandbox %s has no sandbox.expired\n%s", id, dumpEvents(c, id))
	}
	ev := evs[i]
	if ev.Reason != reason || ev.Extra["policy"] != policy {
		t.Errorf("sandbox.expired of %s: reason %q policy %q, want %q %q", id, ev.Reason, ev.Extra["policy"], reason, policy)
	}
	end := "sandbox.deleting"
	if policy == "stop" {
		end = "sandbox.stopped"
	}
	j := indexOf(evs, end)
	if j < i {
		t.Errorf("sandbox %s: %s at %d, want it after sandbox.expired (%d)\n%s", id, end, j, i, dumpEvents(c, id))
	} else if evs[j].Reason != reason {
		t.Errorf("sandbox %s: %s has reason %q, want %q", id, end, evs[j].Reason, reason)
	}
	n := 0
	for _, ev := range evs {
		if ev.Kind == "sandbox.expired" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("sandbox %s expired %d times, want once\n%s", id, n, dumpEvents(c, id))
	}
}

// TestLifetimeTimeout: a sandbox created with a timeout shows its deadline and
// is deleted at it (the default), or stopped with on_timeout "stop", each
// after a sandbox.expired event; a stopped one resumed has no deadline left.
func TestLifetimeTimeout(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 3*time.Minute)

	before := time.Now()
	del, err := c.Create(ctx, e.withLifetime(client.LifetimeRequest{Timeout: 8}))
	if err != nil {
		t.Fatal(err)
	}
	if del.ExpiresAt == nil || del.OnTimeout != "delete" {
		t.Fatalf("a create with timeout 8: expires_at %v, on_timeout %q; want a deadline, delete", del.ExpiresAt, del.OnTimeout)
	}
	if at := *del.ExpiresAt; at.Before(before.Add(7*time.Second)) || at.After(time.Now().Add(9*time.Second)) {
		t.Errorf("expires_at %v, want about 8 s after %v", at, before)
	}
	stop, err := c.Create(ctx, e.withLifetime(client.LifetimeRequest{Timeout: 8, OnTimeout: "stop"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Get(ctx, stop.ID); got.ExpiresAt == nil || got.OnTimeout != "stop" {
		t.Errorf("GET of a sandbox with a deadline: expires_at %v on_timeout %q", got.ExpiresAt, got.OnTimeout)
	}
	if list, _ := c.List(ctx, nil); len(list) != 2 || list[0].ExpiresAt == nil || list[1].ExpiresAt == nil {
		t.Errorf("the list shows no deadlines: %+v", list)
	}
	waitReady(t, c, del.ID)
	waitReady(t, c, stop.ID)

	_, ev := waitState(t, c, del.ID, 30*time.Second, client.StateDeleted)
	if ev.Reason != "timeout" {
		t.Errorf("sandbox.deleted of an expired sandbox: reason %q, want timeout", ev.Reason)
	}
	assertExpired(t, c, del.ID, "timeout", "delete")
	testenv.AssertNoLeftovers(t, e.docker, "dev.airlock.sandbox", del.ID)

	sb, _ := waitState(t, c, stop.ID, 30*time.Second, client.StateStopped, client.StateFailed)
	if sb.State != client.StateStopped {
		t.Fatalf("an expired sandbox with on_timeout stop is %s\n%s", sb.State, dumpEvents(c, stop.ID))
	}
	assertExpired(t, c, stop.ID, "timeout", "stop")
	if sb.ExpiresAt != nil || sb.OnTimeout != "" {
		t.Errorf("a stopped expired sandbox still shows a deadline: %v %q", sb.ExpiresAt, sb.OnTimeout)
	}
	// Resumed, it lives on: its deadline was spent.
	resumed, err := c.Resume(ctx, stop.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitNext(t, c, stop.ID, resumed.LastSeq, "sandbox.ready")
	time.Sleep(2 * time.Second)
	if got, _ := c.Get(ctx, stop.ID); got.State != client.StateReady {
		t.Errorf("a resumed sandbox whose deadline was spent is %s, want ready", got.State)
	}
	if _, err := c.Delete(ctx, stop.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, stop.ID, 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// TestLifetimeUpdate: PATCH /v1/sandboxes/{id} extends a deadline, shortens
// it, clears it, and changes its policy; bad values are 400s naming the field;
// a sandbox being deleted is 409.
func TestLifetimeUpdate(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 3*time.Minute)

	sb, err := c.Create(ctx, e.withLifetime(client.LifetimeRequest{Timeout: 3}))
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, sb.ID)
	// Extended before it passes: the sandbox stays past its first deadline.
	got, err := c.SetTimeout(ctx, sb.ID, 5*time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.ExpiresAt == nil || time.Until(*got.ExpiresAt) < 4*time.Minute || got.OnTimeout != "delete" {
		t.Fatalf("after SetTimeout(5m): expires_at %v on_timeout %q", got.ExpiresAt, got.OnTimeout)
	}
	time.Sleep(5 * time.Second)
	if cur, _ := c.Get(ctx, sb.ID); cur.State != client.StateReady {
		t.Fatalf("an extended sandbox is %s after its first deadline\n%s", cur.State, dumpEvents(c, sb.ID))
	}
	// Cleared: no deadline.
	zero := 0.0
	got, err = c.Update(ctx, sb.ID, &client.UpdateRequest{Timeout: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if got.ExpiresAt != nil || got.OnTimeout != "" {
		t.Errorf("a cleared deadline still shows: %v %q", got.ExpiresAt, got.OnTimeout)
	}
	// on_timeout alone, with no deadline: refused.
	stopPolicy := "stop"
	if _, err := c.Update(ctx, sb.ID, &client.UpdateRequest{OnTimeout: &stopPolicy}); apiReason(err) != client.ReasonInvalidRequest || !strings.Contains(err.Error(), "on_timeout") {
		t.Errorf("on_timeout without a deadline: %v, want invalid_request naming on_timeout", err)
	}
	// Shortened, with the stop policy: it stops at the new deadline.
	got, err = c.SetTimeout(ctx, sb.ID, 2*time.Second, "stop")
	if err != nil {
		t.Fatal(err)
	}
	if got.OnTimeout != "stop" {
		t.Errorf("on_timeout %q, want stop", got.OnTimeout)
	}
	cur, _ := waitState(t, c, sb.ID, 30*time.Second, client.StateStopped, client.StateFailed)
	if cur.State != client.StateStopped {
		t.Fatalf("a sandbox with a shortened deadline is %s", cur.State)
	}
	assertExpired(t, c, sb.ID, "timeout", "stop")

	// Bad values: 400 invalid_request, naming the field.
	for _, tc := range []struct {
		body, field string
	}{
		{`{"timeout": -1}`, "timeout"},
		{`{"timeout": 1e12}`, "timeout"},
		{`{"timeout": "10m"}`, "timeout"},
		{`{"idle_timeout": -5}`, "idle_timeout"},
		{`{"timeout": 60, "on_timeout": "pause"}`, "on_timeout"},
		{`{"on_idle": "later"}`, "on_idle"},
		{`{}`, "nothing to change"},
		{`{"ttl": 5}`, "ttl"},
	} {
		status, body := rawRequest(t, e, http.MethodPatch, "/v1/sandboxes/"+sb.ID, tc.body)
		if status != http.StatusBadRequest || !strings.Contains(body, `"reason":"invalid_request"`) || !strings.Contains(body, tc.field) {
			t.Errorf("PATCH %s: %d %s, want 400 invalid_request naming %s", tc.body, status, body, tc.field)
		}
	}
	// And at create.
	for _, tc := range []struct {
		lt    client.LifetimeRequest
		field string
	}{
		{client.LifetimeRequest{Timeout: -3}, "timeout"},
		{client.LifetimeRequest{IdleTimeout: 4e7}, "idle_timeout"},
		{client.LifetimeRequest{Timeout: 60, OnTimeout: "archive"}, "on_timeout"},
		{client.LifetimeRequest{OnTimeout: "stop"}, "on_timeout"},
		{client.LifetimeRequest{OnIdle: "stop"}, "on_idle"},
	} {
		_, err := c.Create(ctx, e.withLifetime(tc.lt))
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Reason != client.ReasonInvalidRequest || ce.Status != http.StatusBadRequest || !strings.Contains(ce.Message, tc.field) {
			t.Errorf("create with %+v: %v, want 400 invalid_request naming %s", tc.lt, err, tc.field)
		}
	}
	if status, body := rawRequest(t, e, http.MethodPost, "/v1/sandboxes", `{"kind":"up","timeout":"10m","manifest_toml":"[sandbox]\nimage = \"x\"\n"}`); status != http.StatusBadRequest || !strings.Contains(body, "timeout") {
		t.Errorf("create with a timeout that is no number: %d %s", status, body)
	}

	// No such sandbox: 404; one being deleted: 409.
	secs := 60.0
	if _, err := c.Update(ctx, "no-such-sandbox", &client.UpdateRequest{Timeout: &secs}); apiReason(err) != client.ReasonSandboxNotFound {
		t.Errorf("PATCH of no sandbox: %v, want sandbox_not_found", err)
	}
	if _, err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Update(ctx, sb.ID, &client.UpdateRequest{Timeout: &secs}); apiReason(err) != client.ReasonInvalidState {
		t.Errorf("PATCH of a sandbox being deleted: %v, want invalid_state", err)
	}
	waitState(t, c, sb.ID, 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// TestLifetimeRestart: a deadline is kept in the sandbox's record: a daemon
// that restarted shows it and expires the sandbox at it; one that passed
// while no daemon ran expires the sandbox as the daemon starts.
func TestLifetimeRestart(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 3*time.Minute)

	later, err := c.Create(ctx, e.withLifetime(client.LifetimeRequest{Timeout: 20, OnTimeout: "stop"}))
	if err != nil {
		t.Fatal(err)
	}
	passed, err := c.Create(ctx, e.withLifetime(client.LifetimeRequest{Timeout: 10}))
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, later.ID)
	waitReady(t, c, passed.ID)
	d.stop(t, syscall.SIGTERM)
	if wait := time.Until(passed.ExpiresAt.Add(time.Second)); wait > 0 {
		time.Sleep(wait) // passed's deadline passes while no daemon runs
	}
	d = e.startDaemon(binA)
	c = d.client

	got, err := c.Get(ctx, later.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ExpiresAt == nil || !got.ExpiresAt.Equal(*later.ExpiresAt) || got.OnTimeout != "stop" {
		t.Errorf("after a restart: expires_at %v on_timeout %q, want %v stop", got.ExpiresAt, got.OnTimeout, later.ExpiresAt)
	}
	waitState(t, c, passed.ID, 30*time.Second, client.StateDeleted)
	assertExpired(t, c, passed.ID, "timeout", "delete")

	sb, _ := waitState(t, c, later.ID, 40*time.Second, client.StateStopped, client.StateFailed)
	if sb.State != client.StateStopped {
		t.Fatalf("a sandbox whose deadline passed after a restart is %s\n%s", sb.State, dumpEvents(c, later.ID))
	}
	assertExpired(t, c, later.ID, "timeout", "stop")
	if ev := lastEvent(t, c, later.ID, "sandbox.expired"); ev.Time.Before(later.ExpiresAt.Add(-100 * time.Millisecond)) {
		t.Errorf("sandbox.expired at %v, before the deadline %v", ev.Time, later.ExpiresAt)
	}
	if _, err := c.Delete(ctx, later.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, later.ID, 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// TestLifetimeIdle: a sandbox's own idle_timeout replaces the daemon's
// idle_ttl for it: unused that long, it is deleted (the default) or stopped
// (on_idle "stop"); an attached client keeps it; PATCH sets and clears it.
// The daemon's idle_ttl still stops an up sandbox without one.
func TestLifetimeIdle(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeUserConfig("[runtime]\nidle_ttl = \"6s\"\n")
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 3*time.Minute)

	gone, err := c.Create(ctx, e.withLifetime(client.LifetimeRequest{IdleTimeout: 2}))
	if err != nil {
		t.Fatal(err)
	}
	if gone.IdleTimeout != 2 || gone.OnIdle != "delete" {
		t.Errorf("a create with idle_timeout 2: %v %q, want 2 delete", gone.IdleTimeout, gone.OnIdle)
	}
	held, err := c.Create(ctx, e.withLifetime(client.LifetimeRequest{IdleTimeout: 2, OnIdle: "stop"}))
	if err != nil {
		t.Fatal(err)
	}
	release, err := c.Attach(ctx, held.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Kept past the daemon's idle_ttl: its own idle timeout is set by PATCH.
	kept, err := c.Create(ctx, e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	hour := 3600.0
	if got, err := c.Update(ctx, kept.ID, &client.UpdateRequest{IdleTimeout: &hour}); err != nil || got.IdleTimeout != 3600 || got.OnIdle != "delete" {
		t.Fatalf("PATCH idle_timeout 3600: %+v %v", got, err)
	}
	plain, err := c.Create(ctx, e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{gone.ID, held.ID, kept.ID, plain.ID} {
		waitState(t, c, id, 60*time.Second, client.StateReady, client.StateDeleted, client.StateDeleting)
	}

	waitState(t, c, gone.ID, 30*time.Second, client.StateDeleted)
	assertExpired(t, c, gone.ID, "idle_timeout", "delete")
	if got, _ := c.Get(ctx, held.ID); got.State != client.StateReady {
		t.Errorf("an attached sandbox with an idle timeout is %s, want ready", got.State)
	}
	// The daemon's idle_ttl stops the sandbox without one, not the one whose
	// own is an hour.
	sb, _ := waitState(t, c, plain.ID, 30*time.Second, client.StateStopped, client.StateFailed)
	if ev := lastEvent(t, c, plain.ID, "sandbox.stopped"); sb.State != client.StateStopped || ev.Reason != "idle_ttl" {
		t.Errorf("an up sandbox without an idle timeout of its own: %s (%q), want stopped by idle_ttl", sb.State, ev.Reason)
	}
	if got, _ := c.Get(ctx, kept.ID); got.State != client.StateReady {
		t.Errorf("a sandbox with an idle timeout of an hour is %s after the daemon's idle_ttl", got.State)
	}
	release()
	sb, _ = waitState(t, c, held.ID, 30*time.Second, client.StateStopped, client.StateFailed)
	if sb.State != client.StateStopped {
		t.Fatalf("a released sandbox with on_idle stop is %s", sb.State)
	}
	assertExpired(t, c, held.ID, "idle_timeout", "stop")

	// Cleared: the daemon's idle_ttl applies again.
	zero := 0.0
	if got, err := c.Update(ctx, kept.ID, &client.UpdateRequest{IdleTimeout: &zero}); err != nil || got.IdleTimeout != 0 || got.OnIdle != "" {
		t.Fatalf("PATCH idle_timeout 0: %+v %v", got, err)
	}
	sb, _ = waitState(t, c, kept.ID, 30*time.Second, client.StateStopped, client.StateFailed)
	if ev := lastEvent(t, c, kept.ID, "sandbox.stopped"); sb.State != client.StateStopped || ev.Reason != "idle_ttl" {
		t.Errorf("a sandbox whose idle timeout was cleared: %s (%q), want stopped by idle_ttl", sb.State, ev.Reason)
	}
	for _, id := range []string{held.ID, kept.ID, plain.ID} {
		if _, err := c.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		waitState(t, c, id, 30*time.Second, client.StateDeleted)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// rawRequest sends body to the daemon's socket as it is and returns the
// status and the answer's body.
func rawRequest(t *testing.T, e *env, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t, 30*time.Second), method, "http://airlockd"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := socketClient(e.paths.Socket()).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
