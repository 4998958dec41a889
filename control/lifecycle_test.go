package control_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// TestLifecycle: create (up, start) → ready with the ordered events, stop,
// resume, delete, nothing left.
func TestLifecycle(t *testing.T) {
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	sb, err := c.Create(ctxT(t, 30*time.Second), e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != client.StatePending || sb.LastSeq != 1 || sb.Kind != "up" || sb.Project != e.project {
		t.Errorf("create returned %+v, want pending with last_seq 1", sb)
	}
	id := sb.ID
	waitReady(t, c, id)
	evs := allEvents(t, c, id)
	assertContiguous(t, "history", evs, 0)
	if len(evs) == 0 || evs[0].Kind != "sandbox.accepted" || evs[0].Sequence != 1 {
		t.Fatalf("the first event is not sandbox.accepted(1): %v", kinds(evs))
	}
	order := []string{"sandbox.accepted", "sandbox.preparing", "sandbox.created", "sandbox.started", "daemon.started", "daemon.ready", "sandbox.ready"}
	last := -1
	for _, k := range order {
		i := indexOf(evs, k)
		if i < 0 {
			t.Errorf("no %s event: %v", k, kinds(evs))
			continue
		}
		if i < last {
			t.Errorf("%s comes before an earlier step: %v", k, kinds(evs))
		}
		last = i
	}
	if ev := evs[len(evs)-1]; ev.Kind != "sandbox.ready" || ev.State != client.StateReady {
		t.Errorf("the last event is %s (%s), want sandbox.ready", ev.Kind, ev.State)
	}
	for _, ev := range evs {
		if ev.SandboxID != id || ev.Time.IsZero() || ev.State == "" {
			t.Errorf("event %+v lacks its sandbox, time or state", ev)
		}
		if strings.HasPrefix(ev.Kind, "daemon.") && ev.Daemon != "idle" {
			t.Errorf("event %s names daemon %q, want idle", ev.Kind, ev.Daemon)
		}
	}
	got, err := c.Get(ctxT(t, 5*time.Second), id)
	if err != nil || got.State != client.StateReady || got.LastSeq != evs[len(evs)-1].Sequence || got.Daemons.Total != 1 {
		t.Errorf("get = %+v (%v)", got, err)
	}
	if list, err := c.List(ctxT(t, 5*time.Second), nil); err != nil || len(list) != 1 || list[0].ID != id {
		t.Errorf("list = %+v (%v)", list, err)
	}
	if e.containerState(id) != "running" {
		t.Errorf("the primary is %q, want running", e.containerState(id))
	}

	// Stop, resume.
	from := got.LastSeq
	if _, err := c.Stop(ctxT(t, 5*time.Second), id); err != nil {
		t.Fatal(err)
	}
	_, ev := waitState(t, c, id, 30*time.Second, client.StateStopped, client.StateFailed)
	if ev.Kind != "sandbox.stopped" || ev.State != client.StateStopped {
		t.Fatalf("after stop: %+v\n%s", ev, dumpEvents(c, id))
	}
	if s := e.containerState(id); s != "exited" {
		t.Errorf("the primary is %q after stop, want exited", s)
	}
	assertContiguous(t, "history after stop", allEvents(t, c, id), 0)
	if n := countKind(allEvents(t, c, id)[from:], "sandbox.stopped"); n != 1 {
		t.Errorf("%d sandbox.stopped events after one stop\n%s", n, dumpEvents(c, id))
	}
	rs, err := c.Resume(ctxT(t, 5*time.Second), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitNext(t, c, id, rs.LastSeq, "sandbox.ready")
	// Only this run's events: none replayed from the previous run's status stream.
	if k := kinds(allEvents(t, c, id)[rs.LastSeq:]); !slices.Equal(k, []string{"sandbox.started", "daemon.started", "daemon.ready", "sandbox.ready"}) {
		t.Errorf("events of the resume = %v, want sandbox.started, daemon.started, daemon.ready, sandbox.ready", k)
	}
	if s := e.containerState(id); s != "running" {
		t.Errorf("the primary is %q after resume, want running", s)
	}

	// Delete.
	sb, err = c.Delete(ctxT(t, 5*time.Second), id)
	if err != nil {
		t.Fatal(err)
	}
	if sb.State != client.StateDeleting {
		t.Errorf("delete returned state %s, want deleting", sb.State)
	}
	waitState(t, c, id, 30*time.Second, client.StateDeleted)
	evs = allEvents(t, c, id)
	assertContiguous(t, "history after delete", evs, 0)
	if k := kinds(evs); len(k) < 2 || k[len(k)-2] != "sandbox.deleting" || k[len(k)-1] != "sandbox.deleted" {
		t.Errorf("history does not end with deleting, deleted: %v", k)
	}
	testenv.AssertNoLeftovers(t, e.docker, "dev.airlock.sandbox", id)
	if _, err := os.Stat(filepath.Join(e.data, "airlock", "sandboxes", id)); !os.IsNotExist(err) {
		t.Errorf("the sandbox's state dir remains (%v)", err)
	}
	if list, err := c.List(ctxT(t, 5*time.Second), nil); err != nil || len(list) != 0 {
		t.Errorf("list after delete = %+v (%v), want none", list, err)
	}
	if got, err := c.Get(ctxT(t, 5*time.Second), id); err != nil || got.State != client.StateDeleted {
		t.Errorf("get after delete = %+v (%v), want deleted", got, err)
	}
}

func countKind(evs []client.Event, kind string) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// TestFollowSeam: subscribers opened from various cursors while events are
// appended see every sequence once, in order, with no gap at the seam between
// backlog and live.
func TestFollowSeam(t *testing.T) {
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	sb, err := c.Create(ctxT(t, 30*time.Second), e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID
	ready := waitReady(t, c, id)

	// Activity: execs, each adding exec.started and exec.finished.
	const execs = 12
	target := ready.LastSeq + 2*execs
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	activity := func() {
		defer wg.Done()
		for i := 0; i < execs/3; i++ {
			ex, err := c.Exec(context.Background(), id, &client.ExecRequest{Cmd: []string{"true"}})
			if err != nil {
				errs <- err
				return
			}
			if _, err := c.WaitExec(ctxT(t, 30*time.Second), id, ex.ID); err != nil {
				errs <- err
				return
			}
		}
	}
	follow := func(from uint64) {
		defer wg.Done()
		st, err := c.Events(ctxT(t, 60*time.Second), id, from, true)
		if err != nil {
			errs <- err
			return
		}
		defer st.Close()
		next := from + 1
		for next <= target {
			ev, err := st.Next()
			if err != nil {
				errs <- err
				return
			}
			if ev.Sequence != next {
				t.Errorf("follow from %d: got sequence %d (%s), want %d", from, ev.Sequence, ev.Kind, next)
				return
			}
			next++
		}
	}
	wg.Add(3)
	for i := 0; i < 3; i++ {
		go activity()
	}
	// Subscribers opened while the activity goes on, from cursors just behind the head.
	for i := 0; i < 20; i++ {
		cur, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if cur.LastSeq >= target {
			break
		}
		for _, back := range []uint64{0, 1, 3} {
			if cur.LastSeq >= back {
				wg.Add(1)
				go follow(cur.LastSeq - back)
			}
		}
		time.Sleep(20 * time.Millisecond) // spread the subscriptions over the activity
	}
	wg.Add(1)
	go follow(0)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	evs := allEvents(t, c, id)
	assertContiguous(t, "history", evs, 0)
	if n := countKind(evs, "exec.finished"); n != execs {
		t.Errorf("%d exec.finished events, want %d", n, execs)
	}
	// A cursor equal to the last sequence gives nothing; beyond it, bad_cursor.
	last := evs[len(evs)-1].Sequence
	if got, err := readEvents(c, id, last); err != nil || len(got) != 0 {
		t.Errorf("events from the last sequence: %v %v", kinds(got), err)
	}
	for _, follow := range []bool{false, true} {
		_, err := c.Events(ctxT(t, 5*time.Second), id, last+1, follow)
		if apiReason(err) != client.ReasonBadCursor {
			t.Errorf("events from %d (follow %v): %v, want bad_cursor", last+1, follow, err)
		}
	}
	if _, err := c.Delete(ctxT(t, 5*time.Second), id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, "dev.airlock.sandbox", id)
}

// rawGet does an HTTP GET on the daemon's socket and returns status and body.
func rawGet(t *testing.T, sock, path string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	req, _ := http.NewRequestWithContext(ctxT(t, 10*time.Second), http.MethodGet, "http://airlockd"+path, nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode >= 400 && ct != "application/json" {
		t.Errorf("GET %s: error with Content-Type %q, want application/json", path, ct)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAPIErrors: JSON errors with stable reasons.
func TestAPIErrors(t *testing.T) {
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 2*time.Minute)

	code, body := rawGet(t, e.paths.Socket(), "/v1/sandboxes/no-such-sandbox")
	var ce client.Error
	if code != http.StatusNotFound || json.Unmarshal([]byte(body), &ce) != nil || ce.Reason != "sandbox_not_found" || ce.Message == "" {
		t.Errorf("GET an unknown sandbox: %d %s", code, body)
	}
	for _, call := range map[string]func() error{
		"get":    func() error { _, err := c.Get(ctx, "no-such-sandbox"); return err },
		"stop":   func() error { _, err := c.Stop(ctx, "no-such-sandbox"); return err },
		"resume": func() error { _, err := c.Resume(ctx, "no-such-sandbox", nil); return err },
		"delete": func() error { _, err := c.Delete(ctx, "no-such-sandbox"); return err },
		"events": func() error { _, err := c.Events(ctx, "no-such-sandbox", 0, false); return err },
		"follow": func() error { _, err := c.Events(ctx, "no-such-sandbox", 0, true); return err },
		"exec": func() error {
			_, err := c.Exec(ctx, "no-such-sandbox", &client.ExecRequest{Cmd: []string{"true"}})
			return err
		},
	} {
		if err := call(); apiReason(err) != client.ReasonSandboxNotFound {
			t.Errorf("%v on an unknown sandbox, want sandbox_not_found", err)
		}
	}
	for _, bad := range []string{"ab", "-abc", "abc-", "a b c", strings.Repeat("a", 201), "abc/def"} {
		req := e.upRequest(bad)
		if _, err := c.Create(ctx, req); apiReason(err) != client.ReasonInvalidID {
			t.Errorf("create with id %q: %v, want invalid_id", bad, err)
		}
	}
	if list, _ := c.List(ctx, nil); len(list) != 0 {
		t.Errorf("refused creates left records: %+v", list)
	}

	id := uniq("api-errors")
	if _, err := c.Create(ctx, e.upRequest(id)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, e.upRequest(id)); apiReason(err) != client.ReasonIDAlreadyUsed {
		t.Errorf("a second create with id %s: %v, want id_already_used", id, err)
	}
	waitReady(t, c, id)
	sb, _ := c.Get(ctx, id)
	code, body = rawGet(t, e.paths.Socket(), "/v1/sandboxes/"+id+"/events?from=999")
	if code != http.StatusBadRequest || !strings.Contains(body, `"reason":"bad_cursor"`) {
		t.Errorf("events from beyond the end: %d %s", code, body)
	}
	code, body = rawGet(t, e.paths.Socket(), "/v1/sandboxes/"+id+"/events?from=x")
	if code != http.StatusBadRequest || !strings.Contains(body, `"reason":"bad_cursor"`) {
		t.Errorf("events from a non-number: %d %s", code, body)
	}
	if _, err := c.Events(ctx, id, sb.LastSeq+1, true); apiReason(err) != client.ReasonBadCursor {
		t.Errorf("follow from beyond the end: %v, want bad_cursor", err)
	}
	if _, err := c.Resume(ctx, id, nil); apiReason(err) != client.ReasonInvalidState {
		t.Errorf("resume of a ready sandbox: %v, want invalid_state", err)
	}
	if _, err := c.GetExec(ctx, id, "no-such-exec"); apiReason(err) != client.ReasonExecNotFound {
		t.Errorf("an unknown exec: %v, want exec_not_found", err)
	}
	if _, err := c.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, 30*time.Second, client.StateStopped)
	if _, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"true"}}); apiReason(err) != client.ReasonInvalidState {
		t.Errorf("exec in a stopped sandbox: %v, want invalid_state", err)
	}
	if _, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"true"}, Interactive: true}); apiReason(err) != client.ReasonInvalidState {
		t.Errorf("interactive exec in a stopped sandbox: %v, want invalid_state", err)
	}
	if _, err := c.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, 30*time.Second, client.StateDeleted)
	if _, err := c.Create(ctx, e.upRequest(id)); apiReason(err) != client.ReasonIDAlreadyUsed {
		t.Errorf("create with the id of a deleted sandbox: %v, want id_already_used", err)
	}
	if _, err := c.Resume(ctx, id, nil); apiReason(err) != client.ReasonInvalidState {
		t.Errorf("resume of a deleted sandbox: %v, want invalid_state", err)
	}

	// After a restart the ID is still refused.
	d.stop(t, syscall.SIGTERM)
	d = e.startDaemon(binA)
	if _, err := d.client.Create(ctx, e.upRequest(id)); apiReason(err) != client.ReasonIDAlreadyUsed {
		t.Errorf("create with a used id after a restart: %v, want id_already_used", err)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)

	// Bad requests.
	if _, err := d.client.Create(ctx, &client.CreateRequest{Kind: "up"}); apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("create without a manifest: %v, want invalid_request", err)
	}
	req := e.upRequest("")
	req.Kind = "bogus"
	if _, err := d.client.Create(ctx, req); apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("create of kind bogus: %v, want invalid_request", err)
	}
	if list, _ := d.client.List(ctx, nil); len(list) != 0 {
		t.Errorf("refused creates left records: %+v", list)
	}
}

// TestExec: an API exec writes its output to the exec output files, records
// exec.started and exec.finished with the exit code; the files survive a restart.
func TestExec(t *testing.T) {
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 2*time.Minute)
	sb, err := c.Create(ctx, e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID
	waitReady(t, c, id)
	ex, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo out-$FOO; pwd; echo err >&2; exit 3"}, Env: []string{"FOO=bar"}, Workdir: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(e.data, "airlock", "exec-output", id, ex.ID)
	if ex.Stdout != base+".stdout.log" || ex.Stderr != base+".stderr.log" {
		t.Errorf("exec output paths = %q, %q; want %s.{stdout,stderr}.log", ex.Stdout, ex.Stderr, base)
	}
	done, err := c.WaitExec(ctx, id, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.ExitCode == nil || *done.ExitCode != 3 || done.FinishedAt == nil {
		t.Errorf("finished exec = %+v, want exit code 3", done)
	}
	check := func(when string) {
		t.Helper()
		if b, err := os.ReadFile(base + ".stdout.log"); err != nil || string(b) != "out-bar\n/tmp\n" {
			t.Errorf("%s: stdout file = %q (%v)", when, b, err)
		}
		if b, err := os.ReadFile(base + ".stderr.log"); err != nil || string(b) != "err\n" {
			t.Errorf("%s: stderr file = %q (%v)", when, b, err)
		}
	}
	check("after the exec")
	evs := allEvents(t, c, id)
	si := slices.IndexFunc(evs, func(ev client.Event) bool { return ev.Kind == "exec.started" && ev.ExecID == ex.ID })
	fi := slices.IndexFunc(evs, func(ev client.Event) bool { return ev.Kind == "exec.finished" && ev.ExecID == ex.ID })
	if si < 0 || fi < si || evs[fi].ExitCode == nil || *evs[fi].ExitCode != 3 {
		t.Errorf("exec events: started at %d, finished at %d: %v", si, fi, kinds(evs))
	}
	// A caller-chosen exec ID is reserved: reusing it is refused.
	if _, err := c.Exec(ctx, id, &client.ExecRequest{ID: ex.ID, Cmd: []string{"true"}}); apiReason(err) != client.ReasonIDAlreadyUsed {
		t.Errorf("exec with a used exec id: %v, want id_already_used", err)
	}

	d.stop(t, syscall.SIGTERM)
	d = e.startDaemon(binA)
	check("after a daemon restart")
	got, err := d.client.WaitExec(ctx, id, ex.ID)
	if err != nil || got.ExitCode == nil || *got.ExitCode != 3 || got.Stdout != ex.Stdout {
		t.Errorf("exec record after a restart: %+v %v", got, err)
	}
	// Execs still work after a restart (the daemon reopens the sandbox).
	ex2, err := d.client.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"echo", "again"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := d.client.WaitExec(ctx, id, ex2.ID); err != nil || got.ExitCode == nil || *got.ExitCode != 0 {
		t.Errorf("exec after a restart: %+v %v", got, err)
	}
	if b, _ := os.ReadFile(ex2.Stdout); string(b) != "again\n" {
		t.Errorf("exec after a restart wrote %q", b)
	}
	if _, err := d.client.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, d.client, id, 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, "dev.airlock.sandbox", id)
}
