package control_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestLifecycle: create (up, start) → ready with the ordered events, stop,
// resume, delete, nothing left.
func TestLifecycle(t *testing.T) {
	parallel(t)
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
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ready := e.createReady(ctxT(t, 30*time.Second), c, "")
	id := ready.ID

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
