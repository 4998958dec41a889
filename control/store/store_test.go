package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/ids"
)

func dbPath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "airlock", "ids.db")
}

func openAt(t testing.TB, path string, o Options) *Store {
	t.Helper()
	s, err := OpenOptions(path, o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openT(t testing.TB) *Store { return openAt(t, dbPath(t), Options{}) }

func create(t testing.TB, s *Store, id string) Sandbox {
	t.Helper()
	sb, ev, err := s.CreateSandbox(Sandbox{ID: id, Project: "/p"}, Event{})
	if err != nil {
		t.Fatalf("create %q: %v", id, err)
	}
	if ev.Sequence != 1 || ev.Kind != "sandbox.accepted" || ev.State != StatePending || ev.SandboxID != sb.ID {
		t.Fatalf("first event = %+v", ev)
	}
	return sb
}

func appendT(t testing.TB, s *Store, id, kind, state string) Event {
	t.Helper()
	ev, err := s.Append(id, Event{Kind: kind}, state)
	if err != nil {
		t.Fatalf("append %s to %q (-> %q): %v", kind, id, state, err)
	}
	return ev
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
	if !strings.HasPrefix(err.Error(), "cannot ") {
		t.Fatalf("error %q does not start with \"cannot \"", err)
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestOpenModes(t *testing.T) {
	path := dbPath(t)
	s := openAt(t, path, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode = %v, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("folder mode = %v, want 0700", di.Mode().Perm())
	}
	// A looser existing file is tightened.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	openAt(t, path, Options{})
	fi, _ = os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode after reopen = %v, want 0600", fi.Mode().Perm())
	}
}

func TestSecondOpenFailsFast(t *testing.T) {
	path := dbPath(t)
	first, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	second, err := Open(path)
	elapsed := time.Since(start)
	if err == nil {
		_ = second.Close()
		t.Fatal("second Open succeeded while the first holds the file")
	}
	wantErr(t, err, ErrLocked)
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "in use") {
		t.Errorf("error not clear: %v", err)
	}
	if elapsed > 3*time.Second {
		t.Errorf("second Open took %v, want about %v", elapsed, DefaultOpenTimeout)
	}
	// The first opener is undisturbed.
	create(t, first, "still-works")
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third := openAt(t, path, Options{})
	if _, err := third.Get("still-works"); err != nil {
		t.Fatal(err)
	}
}

func TestIDReuseRefused(t *testing.T) {
	path := dbPath(t)
	s := openAt(t, path, Options{})
	create(t, s, "sb-one")
	appendT(t, s, "sb-one", "sandbox.ready", StateReady)
	create(t, s, "sb-other")
	appendT(t, s, "sb-other", "sandbox.ready", StateReady)
	ex, err := s.CreateExec(Exec{ID: "ex-one", SandboxID: "sb-one", Cmd: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReserveExec("sb-one", "ex-two"); err != nil {
		t.Fatal(err)
	}
	appendT(t, s, "sb-one", "sandbox.deleting", StateDeleting)
	appendT(t, s, "sb-one", "sandbox.deleted", StateDeleted)

	check := func(s *Store) {
		t.Helper()
		_, _, err := s.CreateSandbox(Sandbox{ID: "sb-one"}, Event{})
		wantErr(t, err, ErrIDUsed)
		wantErr(t, s.Reserve(KindSandbox, "sb-one"), ErrIDUsed)
		_, err = s.CreateExec(Exec{ID: ex.ID, SandboxID: "sb-other", Cmd: []string{"true"}})
		wantErr(t, err, ErrIDUsed)
		wantErr(t, s.Reserve(KindExec, "ex-two"), ErrIDUsed)
		for _, k := range []string{KindSandbox, KindExec} {
			used, err := s.Reserved(k, "sb-one")
			if err != nil || used != (k == KindSandbox) {
				t.Fatalf("Reserved(%s, sb-one) = %v, %v", k, used, err)
			}
		}
	}
	check(s)
	if n, err := s.Purge(time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("purge = %d, %v", n, err)
	}
	if _, err := s.Get("sb-one"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after purge: %v", err)
	}
	check(s)

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	check(s)
	// Namespaces are separate: an exec id may equal a sandbox id.
	if err := s.Reserve(KindExec, "sb-one"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve("volume", "vol-1"); err == nil || !strings.HasPrefix(err.Error(), "cannot ") {
		t.Fatalf("unknown kind: %v", err)
	}
}

func TestInvalidIDs(t *testing.T) {
	s := openT(t)
	good := []string{"abcd", "a-_9", "AB_cd-12", strings.Repeat("a", 200), ids.New()}
	bad := []string{"", "abc", "-abc", "abc-", "_abc", "abc_", "ab cd", "ab/cd", "ab.cd", "ab:cd",
		"日本語ab", strings.Repeat("a", 201), "abcd\n", "../../etc"}
	for _, id := range good {
		if err := s.Reserve(KindSandbox, id); err != nil {
			t.Errorf("Reserve(%q) = %v", id, err)
		}
	}
	for _, id := range bad {
		wantErr(t, s.Reserve(KindSandbox, id), ErrInvalidID)
		if id == "" {
			continue // an empty ID means "make one"
		}
		_, _, err := s.CreateSandbox(Sandbox{ID: id}, Event{})
		wantErr(t, err, ErrInvalidID)
		if used, _ := s.Reserved(KindSandbox, id); used {
			t.Errorf("invalid id %q was reserved", id)
		}
	}
	create(t, s, "host-sb")
	appendT(t, s, "host-sb", "sandbox.ready", StateReady)
	_, err := s.CreateExec(Exec{ID: "a b", SandboxID: "host-sb"})
	wantErr(t, err, ErrInvalidID)
	_, err = s.ReserveExec("host-sb", "x")
	wantErr(t, err, ErrInvalidID)
}

func TestSequencesContiguousAcrossReopen(t *testing.T) {
	path := dbPath(t)
	s := openAt(t, path, Options{})
	create(t, s, "seq-sb")
	appendT(t, s, "seq-sb", "sandbox.preparing", "")
	appendT(t, s, "seq-sb", "sandbox.ready", StateReady)
	for i := range 3 {
		appendT(t, s, "seq-sb", "daemon.started", "")
		_ = i
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	if sb, _ := s.Get("seq-sb"); sb.LastSeq != 6 || sb.State != StateReady {
		t.Fatalf("after reopen: %+v", sb)
	}
	if ev := appendT(t, s, "seq-sb", "sandbox.stopped", StateStopped); ev.Sequence != 7 || ev.State != StateStopped {
		t.Fatalf("append after reopen = %+v", ev)
	}
	for range 3 {
		appendT(t, s, "seq-sb", "daemon.stopped", "")
	}
	evs, err := s.Events("seq-sb", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 10 {
		t.Fatalf("%d events, want 10", len(evs))
	}
	for i, ev := range evs {
		if ev.Sequence != uint64(i+1) || ev.SandboxID != "seq-sb" || ev.Time.IsZero() {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
	if evs[6].State != StateStopped || evs[9].State != StateStopped || evs[2].State != StateReady || evs[1].State != StatePending {
		t.Fatalf("states: %+v", evs)
	}
}

func TestAppendFailureLeavesNothing(t *testing.T) {
	s := openT(t)
	create(t, s, "nothing-sb")
	_, err := s.Append("nothing-sb", Event{Kind: "sandbox.stopped"}, StateStopped) // pending -> stopped
	wantErr(t, err, ErrInvalidState)
	_, err = s.Append("nothing-sb", Event{Kind: "x"}, "bogus")
	wantErr(t, err, ErrInvalidState)
	_, err = s.Append("nothing-sb", Event{}, "")
	if err == nil || !strings.HasPrefix(err.Error(), "cannot ") {
		t.Fatalf("event without kind: %v", err)
	}
	_, err = s.Append("no-such-sb", Event{Kind: "x"}, "")
	wantErr(t, err, ErrNotFound)
	sb, _ := s.Get("nothing-sb")
	evs, _ := s.Events("nothing-sb", 0)
	if sb.State != StatePending || sb.LastSeq != 1 || len(evs) != 1 {
		t.Fatalf("after failed appends: %+v, %d events", sb, len(evs))
	}
}

// A reader never sees a state without the event that announces it.
func TestAppendStateAtomicity(t *testing.T) {
	s := openT(t)
	create(t, s, "atomic-sb")
	appendT(t, s, "atomic-sb", "sandbox.ready", StateReady)
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() {
			reads := 0
			for {
				select {
				case <-done:
					if reads == 0 {
						errs <- errors.New("reader never ran")
					}
					return
				default:
				}
				sb, err := s.Get("atomic-sb")
				if err != nil {
					errs <- err
					return
				}
				evs, err := s.Events("atomic-sb", sb.LastSeq-1)
				if err != nil {
					errs <- err
					return
				}
				if len(evs) == 0 || evs[0].Sequence != sb.LastSeq || evs[0].State != sb.State {
					errs <- fmt.Errorf("record %s at %d, events after %d: %+v", sb.State, sb.LastSeq, sb.LastSeq-1, evs)
					return
				}
				// The event that made the current state is in the history.
				all, _ := s.Events("atomic-sb", 0)
				want := map[string]string{StateReady: "sandbox.ready", StateStopped: "sandbox.stopped"}[sb.State]
				found := false
				for i := len(all) - 1; i >= 0; i-- {
					if all[i].Sequence <= sb.LastSeq && all[i].Kind == want {
						found = true
						break
					}
				}
				if !found {
					errs <- fmt.Errorf("state %s visible without a %s event", sb.State, want)
					return
				}
				reads++
			}
		})
	}
	state := StateReady
	for range 150 {
		next, kind := StateStopped, "sandbox.stopped"
		if state == StateStopped {
			next, kind = StateReady, "sandbox.ready"
		}
		appendT(t, s, "atomic-sb", "daemon.exited", "")
		appendT(t, s, "atomic-sb", kind, next)
		state = next
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestTransitions(t *testing.T) {
	// The table, written out independently of the implementation.
	allowed := map[string][]string{
		StatePending:  {StateReady, StateFailed, StateDeleting},
		StateReady:    {StateStopped, StateFailed, StateDeleting, StatePaused},
		StatePaused:   {StateReady, StateStopped, StateFailed, StateDeleting},
		StateStopped:  {StateReady, StateFailed, StateDeleting},
		StateFailed:   {StateReady, StateDeleting},
		StateDeleting: {StateDeleted},
		StateDeleted:  {},
	}
	path := map[string][]string{
		StatePending:  nil,
		StateReady:    {StateReady},
		StatePaused:   {StateReady, StatePaused},
		StateStopped:  {StateReady, StateStopped},
		StateFailed:   {StateFailed},
		StateDeleting: {StateDeleting},
		StateDeleted:  {StateDeleting, StateDeleted},
	}
	s := openT(t)
	n := 0
	for _, from := range States {
		for _, to := range append(slicesClone(States), "bogus") {
			n++
			id := fmt.Sprintf("tr-%s-%s", from, to)
			create(t, s, id)
			for _, st := range path[from] {
				appendT(t, s, id, "sandbox."+st, st)
			}
			ok := false
			for _, a := range allowed[from] {
				ok = ok || a == to
			}
			if CanTransition(from, to) != ok {
				t.Errorf("CanTransition(%s, %s) = %v", from, to, !ok)
			}
			stay := from == to && from != StateDeleted // same state: unchanged, allowed
			before, _ := s.Get(id)
			ev, err := s.Append(id, Event{Kind: "sandbox.change", Reason: "r-" + to}, to)
			after, _ := s.Get(id)
			switch {
			case ok || stay:
				if err != nil {
					t.Errorf("%s -> %s: %v", from, to, err)
					continue
				}
				if ev.State != to || after.State != to || after.LastSeq != before.LastSeq+1 {
					t.Errorf("%s -> %s: event %+v, record %+v", from, to, ev, after)
				}
				if ok && after.Reason != "r-"+to {
					t.Errorf("%s -> %s: reason %q", from, to, after.Reason)
				}
				if to == StateDeleted && !after.DeletedAt.Equal(ev.Time) {
					t.Errorf("deleted_at %v, event time %v", after.DeletedAt, ev.Time)
				}
			default:
				wantErr(t, err, ErrInvalidState)
				if after.State != from || after.LastSeq != before.LastSeq {
					t.Errorf("%s -> %s refused but record changed: %+v", from, to, after)
				}
			}
		}
	}
	// A deleted sandbox takes no more events at all.
	_, err := s.Append("tr-deleted-deleted", Event{Kind: "daemon.exited"}, "")
	wantErr(t, err, ErrInvalidState)
	if n != 56 {
		t.Fatalf("checked %d pairs", n)
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// Subscribing from N while several goroutines append: every subscriber sees
// exactly the events after N, in order, with no gap and no duplicate.
func TestSubscribeNoGapNoDup(t *testing.T) {
	s := openT(t)
	iterations := 40
	if testing.Short() {
		iterations = 10
	}
	const writers, perWriter, subscribers = 4, 20, 4
	for it := range iterations {
		id := fmt.Sprintf("sub-%03d", it)
		create(t, s, id)
		pre := rand.IntN(5)
		for range pre {
			appendT(t, s, id, "sandbox.preparing", "")
		}
		total := uint64(1 + pre + writers*perWriter)

		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, writers+subscribers)
		for w := range writers {
			wg.Go(func() {
				<-start
				for n := range perWriter {
					_, err := s.Append(id, Event{Kind: "daemon.started", Extra: map[string]string{"w": strconv.Itoa(w), "n": strconv.Itoa(n)}}, "")
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		got := make([][]Event, subscribers)
		froms := make([]uint64, subscribers)
		for i := range subscribers {
			wg.Go(func() {
				<-start
				for range rand.IntN(50) {
					time.Sleep(time.Duration(rand.IntN(30)) * time.Microsecond)
				}
				sb, err := s.Get(id)
				if err != nil {
					errs <- err
					return
				}
				from := rand.Uint64N(sb.LastSeq + 1)
				froms[i] = from
				sub, err := s.Watch(id, from)
				if err != nil {
					errs <- err
					return
				}
				defer sub.Cancel()
				evs := sub.Backlog
				timeout := time.After(20 * time.Second)
				for len(evs) == 0 || evs[len(evs)-1].Sequence < total {
					select {
					case ev, ok := <-sub.C:
						if !ok {
							errs <- fmt.Errorf("live channel closed: %v", sub.Err())
							return
						}
						evs = append(evs, ev)
					case <-timeout:
						errs <- fmt.Errorf("subscriber from %d stuck after %d events", from, len(evs))
						return
					}
				}
				got[i] = evs
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("iteration %d: %v", it, err)
		}
		all, err := s.Events(id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(all)) != total {
			t.Fatalf("iteration %d: %d events stored, want %d", it, len(all), total)
		}
		// Each writer's events are in its own order.
		lastN := map[string]int{}
		for _, ev := range all {
			if w, ok := ev.Extra["w"]; ok {
				n, _ := strconv.Atoi(ev.Extra["n"])
				if prev, seen := lastN[w]; seen && n != prev+1 || !seen && n != 0 {
					t.Fatalf("iteration %d: writer %s event %d after %d", it, w, n, prev)
				}
				lastN[w] = n
			}
		}
		for i, evs := range got {
			if uint64(len(evs)) != total-froms[i] {
				t.Fatalf("iteration %d: subscriber from %d got %d events, want %d", it, froms[i], len(evs), total-froms[i])
			}
			for j, ev := range evs {
				want := all[froms[i]+uint64(j)]
				if ev.Sequence != want.Sequence || ev.Extra["w"] != want.Extra["w"] || ev.Extra["n"] != want.Extra["n"] || ev.Kind != want.Kind {
					t.Fatalf("iteration %d: subscriber from %d, event %d = %+v, want %+v", it, froms[i], j, ev, want)
				}
			}
		}
	}
}

func TestBadCursor(t *testing.T) {
	s := openT(t)
	create(t, s, "cur-sb")
	appendT(t, s, "cur-sb", "sandbox.ready", StateReady)
	_, err := s.Events("cur-sb", 3)
	wantErr(t, err, ErrBadCursor)
	_, _, _, err = s.Subscribe("cur-sb", 3)
	wantErr(t, err, ErrBadCursor)
	_, err = s.Events("nope-sb", 0)
	wantErr(t, err, ErrNotFound)
	_, _, _, err = s.Subscribe("nope-sb", 0)
	wantErr(t, err, ErrNotFound)

	evs, err := s.Events("cur-sb", 2)
	if err != nil || len(evs) != 0 {
		t.Fatalf("Events at the last sequence = %v, %v", evs, err)
	}
	backlog, live, cancel, err := s.Subscribe("cur-sb", 2)
	if err != nil || len(backlog) != 0 {
		t.Fatalf("Subscribe at the last sequence = %v, %v", backlog, err)
	}
	defer cancel()
	appendT(t, s, "cur-sb", "sandbox.stopped", StateStopped)
	select {
	case ev := <-live:
		if ev.Sequence != 3 || ev.State != StateStopped {
			t.Fatalf("live = %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no live event")
	}
	backlog, _, cancel2, err := s.Subscribe("cur-sb", 1)
	if err != nil || len(backlog) != 2 || backlog[0].Sequence != 2 {
		t.Fatalf("Subscribe from 1 = %+v, %v", backlog, err)
	}
	cancel2()
}

func TestSlowSubscriber(t *testing.T) {
	s := openAt(t, dbPath(t), Options{SubscriberBuffer: 4})
	create(t, s, "slow-sb")
	sub, err := s.Watch("slow-sb", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, fastLive, fastCancel, err := s.Subscribe("slow-sb", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer fastCancel()
	var fast []Event
	fastDone := make(chan struct{})
	go func() {
		defer close(fastDone)
		for ev := range fastLive {
			fast = append(fast, ev)
		}
	}()

	appended := make(chan error, 1)
	go func() {
		for range 20 {
			if _, err := s.Append("slow-sb", Event{Kind: "daemon.exited"}, ""); err != nil {
				appended <- err
				return
			}
		}
		appended <- nil
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Append blocked on a slow subscriber")
	}
	var got []Event
	for ev := range sub.C {
		got = append(got, ev)
	}
	wantErr(t, sub.Err(), ErrSubscriberTooSlow)
	if len(got) != 4 || got[0].Sequence != 2 || got[3].Sequence != 5 {
		t.Fatalf("slow subscriber got %+v", got)
	}
	sub.Cancel() // harmless after the drop
	sub.Cancel()
	// It resumes from the last sequence it received, without loss.
	again, err := s.Watch("slow-sb", got[len(got)-1].Sequence)
	if err != nil {
		t.Fatal(err)
	}
	again.Cancel()
	if len(again.Backlog) != 16 || again.Backlog[0].Sequence != 6 || again.Backlog[15].Sequence != 21 {
		t.Fatalf("resumed backlog: %d events", len(again.Backlog))
	}
	if again.Err() != nil {
		t.Fatalf("Err after Cancel = %v", again.Err())
	}
	if _, ok := <-again.C; ok {
		t.Fatal("channel open after Cancel")
	}
	// The fast subscriber may or may not have kept up with a 4-slot
	// buffer; whatever it received is a contiguous run from 2.
	fastCancel()
	<-fastDone
	for i, ev := range fast {
		if ev.Sequence != uint64(i+2) {
			t.Fatalf("fast subscriber event %d = %d", i, ev.Sequence)
		}
	}
}

func TestCloseEndsSubscriptions(t *testing.T) {
	s, err := Open(dbPath(t))
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, "close-sb")
	sub, err := s.Watch("close-sb", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, ok := <-sub.C; ok {
		t.Fatal("channel open after Close")
	}
	if !errors.Is(sub.Err(), ErrClosed) {
		t.Fatalf("Err = %v", sub.Err())
	}
	sub.Cancel()
	_, err = s.Append("close-sb", Event{Kind: "x"}, "")
	wantErr(t, err, ErrClosed)
	_, err = s.Get("close-sb")
	wantErr(t, err, ErrClosed)
	wantErr(t, s.Reserve(KindSandbox, "abcd"), ErrClosed)
	_, err = s.Watch("close-sb", 0)
	wantErr(t, err, ErrClosed)
}

func TestPurgeKeepsReservations(t *testing.T) {
	path := dbPath(t)
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := openAt(t, path, Options{Now: c.now})
	del := func(id string) {
		appendT(t, s, id, "sandbox.deleting", StateDeleting)
		appendT(t, s, id, "sandbox.deleted", StateDeleted)
	}
	for _, id := range []string{"old-sb", "new-sb", "live-sb", "deleting-sb"} {
		create(t, s, id)
		appendT(t, s, id, "sandbox.ready", StateReady)
	}
	if _, err := s.CreateExec(Exec{ID: "old-exec", SandboxID: "old-sb", Cmd: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	del("old-sb")
	c.add(time.Hour)
	cutoff := c.now()
	c.add(time.Hour)
	del("new-sb")
	appendT(t, s, "deleting-sb", "sandbox.deleting", StateDeleting)
	sub, err := s.Watch("old-sb", 0)
	if err != nil {
		t.Fatal(err)
	}
	c.add(24 * time.Hour)

	n, err := s.Purge(cutoff)
	if err != nil || n != 1 {
		t.Fatalf("purge = %d, %v", n, err)
	}
	for range sub.C {
	}
	if !errors.Is(sub.Err(), ErrNotFound) {
		t.Fatalf("subscription of a purged sandbox: %v", sub.Err())
	}
	_, err = s.Get("old-sb")
	wantErr(t, err, ErrNotFound)
	_, err = s.Events("old-sb", 0)
	wantErr(t, err, ErrNotFound)
	_, err = s.GetExec("old-sb", "old-exec")
	wantErr(t, err, ErrNotFound)
	list, _ := s.List(Filter{IncludeDeleted: true})
	var ids []string
	for _, sb := range list {
		ids = append(ids, sb.ID)
	}
	if strings.Join(ids, ",") != "deleting-sb,live-sb,new-sb" {
		t.Fatalf("left after purge: %v", ids)
	}
	if evs, _ := s.Events("new-sb", 0); len(evs) != 4 {
		t.Fatalf("new-sb lost events: %d", len(evs))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{Now: c.now})
	wantErr(t, s.Reserve(KindSandbox, "old-sb"), ErrIDUsed)
	wantErr(t, s.Reserve(KindExec, "old-exec"), ErrIDUsed)
	if n, err := s.Purge(c.now()); err != nil || n != 1 {
		t.Fatalf("second purge = %d, %v", n, err)
	}
	wantErr(t, s.Reserve(KindSandbox, "new-sb"), ErrIDUsed)
}

func TestList(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := openAt(t, dbPath(t), Options{Now: c.now})
	mk := func(id string, labels map[string]string, states ...string) {
		c.add(time.Second)
		if _, _, err := s.CreateSandbox(Sandbox{ID: id, Labels: labels}, Event{}); err != nil {
			t.Fatal(err)
		}
		for _, st := range states {
			appendT(t, s, id, "sandbox."+st, st)
		}
	}
	mk("lst-a", map[string]string{"team": "x", "ci": "1"}, StateReady)
	mk("lst-b", map[string]string{"team": "x"}, StateReady, StateStopped)
	mk("lst-c", map[string]string{"team": "y"})
	mk("lst-d", map[string]string{"team": "x", "ci": "1"}, StateDeleting, StateDeleted)
	cases := []struct {
		f    Filter
		want string
	}{
		{Filter{}, "lst-a,lst-b,lst-c"},
		{Filter{IncludeDeleted: true}, "lst-a,lst-b,lst-c,lst-d"},
		{Filter{Labels: map[string]string{"team": "x"}}, "lst-a,lst-b"},
		{Filter{Labels: map[string]string{"team": "x", "ci": "1"}}, "lst-a"},
		{Filter{Labels: map[string]string{"team": "x", "ci": "1"}, IncludeDeleted: true}, "lst-a,lst-d"},
		{Filter{Labels: map[string]string{"ci": "2"}}, ""},
		{Filter{States: []string{StateReady, StatePending}}, "lst-a,lst-c"},
		{Filter{States: []string{StateDeleted}}, "lst-d"},
	}
	for _, tc := range cases {
		list, err := s.List(tc.f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, sb := range list {
			ids = append(ids, sb.ID)
		}
		if got := strings.Join(ids, ","); got != tc.want {
			t.Errorf("List(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestRecordRoundTripAndUpdate(t *testing.T) {
	path := dbPath(t)
	s := openAt(t, path, Options{})
	in := Sandbox{ID: "rec-sb", Kind: "run", Project: "/src/p", Owner: "me", Labels: map[string]string{"a": "b"},
		Plan: json.RawMessage(`{"image":"debian"}`), CLIPid: 42, CLIStart: "12345"}
	if _, _, err := s.CreateSandbox(in, Event{Reason: "api"}); err != nil {
		t.Fatal(err)
	}
	in.Labels["a"] = "mutated" // the store kept its own copy
	got, err := s.Get("rec-sb")
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["a"] != "b" || string(got.Plan) != `{"image":"debian"}` || got.CLIPid != 42 || got.Kind != "run" ||
		got.State != StatePending || got.CreatedAt.IsZero() || got.LastSeq != 1 {
		t.Fatalf("record = %+v", got)
	}
	up, err := s.Update("rec-sb", func(sb *Sandbox) error {
		sb.ContainerID = "c0ffee"
		sb.Labels["x"] = "y"
		return nil
	})
	if err != nil || up.ContainerID != "c0ffee" {
		t.Fatalf("update = %+v, %v", up, err)
	}
	_, err = s.Update("rec-sb", func(sb *Sandbox) error { sb.State = StateReady; return nil })
	if err == nil || !strings.HasPrefix(err.Error(), "cannot ") {
		t.Fatalf("update of the state: %v", err)
	}
	_, err = s.Update("nope-sb", func(*Sandbox) error { return nil })
	wantErr(t, err, ErrNotFound)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	got, _ = s.Get("rec-sb")
	if got.ContainerID != "c0ffee" || got.Labels["x"] != "y" || got.State != StatePending {
		t.Fatalf("after reopen = %+v", got)
	}
}

func TestExecs(t *testing.T) {
	s := openT(t)
	create(t, s, "ex-sb")
	_, err := s.CreateExec(Exec{ID: "early", SandboxID: "ex-sb", Cmd: []string{"true"}})
	wantErr(t, err, ErrInvalidState)
	if used, _ := s.Reserved(KindExec, "early"); used {
		t.Fatal("a refused exec reserved its id")
	}
	_, err = s.CreateExec(Exec{ID: "orphan", SandboxID: "nope-sb"})
	wantErr(t, err, ErrNotFound)
	appendT(t, s, "ex-sb", "sandbox.ready", StateReady)

	ex, err := s.CreateExec(Exec{ID: "build-1", SandboxID: "ex-sb", Cmd: []string{"make", "test"},
		StdoutPath: "/o/ex-sb/build-1.stdout.log", StderrPath: "/o/ex-sb/build-1.stderr.log"})
	if err != nil || ex.StartedAt.IsZero() || ex.ExitCode != nil {
		t.Fatalf("create exec = %+v, %v", ex, err)
	}
	ex2, err := s.CreateExec(Exec{SandboxID: "ex-sb", Cmd: []string{"sleep", "1"}})
	if err != nil || ids.Validate(ex2.ID) != nil {
		t.Fatalf("create exec without id = %+v, %v", ex2, err)
	}
	_, err = s.CreateExec(Exec{ID: "build-1", SandboxID: "ex-sb"})
	wantErr(t, err, ErrIDUsed)

	running, _ := s.ListExecs("ex-sb", true)
	if len(running) != 2 {
		t.Fatalf("running = %+v", running)
	}
	fin, err := s.FinishExec("ex-sb", "build-1", 0, time.Time{})
	if err != nil || fin.ExitCode == nil || *fin.ExitCode != 0 || fin.FinishedAt.IsZero() {
		t.Fatalf("finish = %+v, %v", fin, err)
	}
	_, err = s.FinishExec("ex-sb", "build-1", 1, time.Time{})
	wantErr(t, err, ErrInvalidState)
	_, err = s.FinishExec("ex-sb", "nope", 1, time.Time{})
	wantErr(t, err, ErrExecNotFound)
	_, err = s.GetExec("nope-sb", "build-1")
	wantErr(t, err, ErrNotFound)
	got, err := s.GetExec("ex-sb", "build-1")
	if err != nil || got.Cmd[1] != "test" || *got.ExitCode != 0 || got.StdoutPath == "" {
		t.Fatalf("get exec = %+v, %v", got, err)
	}
	raw, _ := json.Marshal(got)
	for _, k := range []string{`"exec_id":"build-1"`, `"sandbox_id":"ex-sb"`, `"cmd":["make","test"]`, `"started_at":`, `"finished_at":`, `"exit_code":0`, `"stdout_path":`, `"stderr_path":`} {
		if !strings.Contains(string(raw), k) {
			t.Errorf("exec JSON %s lacks %s", raw, k)
		}
	}
	all, _ := s.ListExecs("ex-sb", false)
	running, _ = s.ListExecs("ex-sb", true)
	if len(all) != 2 || len(running) != 1 || running[0].ID != ex2.ID {
		t.Fatalf("all = %+v, running = %+v", all, running)
	}
}

// TestExecWithItsEvent: StartExec and FinishExecEvent write an exec's record
// and its event together, or (refused) neither, and publish the event.
func TestExecWithItsEvent(t *testing.T) {
	s := openT(t)
	create(t, s, "we-sb")
	_, _, err := s.StartExec(Exec{ID: "too-early", SandboxID: "we-sb", Cmd: []string{"true"}}, Event{Kind: "exec.started"})
	wantErr(t, err, ErrInvalidState)
	if evs, _ := s.Events("we-sb", 0); len(evs) != 1 {
		t.Fatalf("a refused exec left events %+v", evs)
	}
	if used, _ := s.Reserved(KindExec, "too-early"); used {
		t.Fatal("a refused exec reserved its id")
	}
	appendT(t, s, "we-sb", "sandbox.ready", StateReady)
	backlog, live, cancel, err := s.Subscribe("we-sb", 2)
	if err != nil || len(backlog) != 0 {
		t.Fatalf("subscribe = %+v, %v", backlog, err)
	}
	defer cancel()

	ex, ev, err := s.StartExec(Exec{SandboxID: "we-sb", Cmd: []string{"make"}}, Event{Kind: "exec.started"})
	if err != nil || ids.Validate(ex.ID) != nil || ev.ExecID != ex.ID || ev.Sequence != 3 || ev.State != StateReady {
		t.Fatalf("start = %+v, %+v, %v", ex, ev, err)
	}
	if got := <-live; got.Sequence != 3 || got.Kind != "exec.started" {
		t.Fatalf("published %+v", got)
	}
	code := 7
	fin, ev, err := s.FinishExecEvent("we-sb", ex.ID, ExecEnd{ExitCode: 7, Truncated: true}, Event{Kind: "exec.finished", ExitCode: &code})
	if err != nil || *fin.ExitCode != 7 || !fin.Truncated || ev.Sequence != 4 || ev.ExecID != ex.ID {
		t.Fatalf("finish = %+v, %+v, %v", fin, ev, err)
	}
	if got := <-live; got.Sequence != 4 || *got.ExitCode != 7 {
		t.Fatalf("published %+v", got)
	}
	got, _ := s.GetExec("we-sb", ex.ID)
	if *got.ExitCode != 7 || got.FinishedAt.IsZero() {
		t.Fatalf("record = %+v", got)
	}
	// A second end leaves the record as it was, says so, and the history
	// still tells what happened.
	_, ev, err = s.FinishExecEvent("we-sb", ex.ID, ExecEnd{ExitCode: 1}, Event{Kind: "exec.finished"})
	wantErr(t, err, ErrInvalidState)
	if ev.Sequence != 5 {
		t.Fatalf("second finish event = %+v", ev)
	}
	if got, _ := s.GetExec("we-sb", ex.ID); *got.ExitCode != 7 {
		t.Fatalf("record after a second end = %+v", got)
	}
}

func TestEventJSON(t *testing.T) {
	zero, delay := 0, int64(0)
	ev := Event{SandboxID: "s-1", Sequence: 3, Kind: "daemon.restarting", Time: time.Date(2026, 2, 3, 4, 5, 6, 7, time.UTC),
		State: StateReady, Daemon: "redis", Service: "db", ExecID: "e-1", Reason: "exited", Signal: "SIGKILL",
		ExitCode: &zero, Attempt: 2, DelayMS: &delay, PID: 77}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"sandbox_id":"s-1","sequence":3,"kind":"daemon.restarting","time":"2026-02-03T04:05:06.000000007Z","state":"ready","daemon":"redis","service":"db","exec_id":"e-1","reason":"exited","signal":"SIGKILL","exit_code":0,"attempt":2,"delay_ms":0,"pid":77}`
	if string(raw) != want {
		t.Fatalf("JSON\n got %s\nwant %s", raw, want)
	}
	raw, _ = json.Marshal(Event{SandboxID: "s-1", Sequence: 1, Kind: "sandbox.accepted", State: StatePending})
	if strings.Contains(string(raw), "exit_code") || strings.Contains(string(raw), "delay_ms") || strings.Contains(string(raw), "extra") {
		t.Fatalf("empty details printed: %s", raw)
	}
	// Stored events keep exit code 0 and a zero delay.
	s := openT(t)
	create(t, s, "json-sb")
	if _, err := s.Append("json-sb", Event{Kind: "daemon.exited", Daemon: "redis", ExitCode: &zero, DelayMS: &delay, Extra: map[string]string{"k": "v"}}, ""); err != nil {
		t.Fatal(err)
	}
	evs, _ := s.Events("json-sb", 1)
	if evs[0].ExitCode == nil || *evs[0].ExitCode != 0 || evs[0].DelayMS == nil || evs[0].Extra["k"] != "v" || evs[0].Time.Location() != time.UTC {
		t.Fatalf("stored = %+v", evs[0])
	}
}

func BenchmarkAppend(b *testing.B) {
	s := openAt(b, dbPath(b), Options{})
	create(b, s, "bench-sb")
	code := 0
	ev := Event{Kind: "daemon.exited", Daemon: "redis", ExitCode: &code, PID: 1234}
	for b.Loop() {
		if _, err := s.Append("bench-sb", ev, ""); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendWithSubscriber(b *testing.B) {
	s := openAt(b, dbPath(b), Options{})
	create(b, s, "bench-sb")
	sub, err := s.Watch("bench-sb", 0)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for range sub.C {
		}
	}()
	ev := Event{Kind: "daemon.started", Daemon: "redis", PID: 1234}
	for b.Loop() {
		if _, err := s.Append("bench-sb", ev, ""); err != nil {
			b.Fatal(err)
		}
	}
	sub.Cancel()
}

// TestCreateWithEvents: a record created with the events of its making has
// them in order, numbered from 1, pending, in its history after a reopen; the
// next append follows them; an ID taken refuses the whole write.
func TestCreateWithEvents(t *testing.T) {
	path := dbPath(t)
	s := openAt(t, path, Options{})
	sb, evs, err := s.CreateSandboxEvents(Sandbox{ID: "made-sb", ContainerID: "c1"},
		[]Event{{}, {Kind: "sandbox.preparing"}, {Kind: "sandbox.created", Extra: map[string]string{"container": "c1"}}, {Kind: "pool.claimed"}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.LastSeq != 4 || sb.State != StatePending || sb.ContainerID != "c1" || len(evs) != 4 || evs[0].Kind != "sandbox.accepted" || evs[3].Sequence != 4 {
		t.Fatalf("created %+v with %+v", sb, evs)
	}
	if _, _, err := s.CreateSandboxEvents(Sandbox{ID: "made-sb"}, []Event{{}, {Kind: "sandbox.created"}}); !errors.Is(err, ErrIDUsed) {
		t.Fatalf("a second create of the ID: %v, want ErrIDUsed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	if ev := appendT(t, s, "made-sb", "sandbox.started", ""); ev.Sequence != 5 {
		t.Fatalf("the append after the made events: %+v", ev)
	}
	got, err := s.Events("made-sb", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sandbox.accepted", "sandbox.preparing", "sandbox.created", "pool.claimed", "sandbox.started"}
	for i, ev := range got {
		if i >= len(want) || ev.Kind != want[i] || ev.Sequence != uint64(i+1) || (i < 4 && ev.State != StatePending) {
			t.Fatalf("history %+v, want %v", got, want)
		}
	}
	if len(got) != len(want) || got[2].Extra["container"] != "c1" {
		t.Fatalf("history %+v, want %v", got, want)
	}
}

// TestAppendWithChangesRecord: an event appended with a change of the record
// writes both; a change of a field the store keeps writes neither.
func TestAppendWithChangesRecord(t *testing.T) {
	s := openT(t)
	if _, _, err := s.CreateSandboxEvents(Sandbox{ID: "park-sb", Parked: true}, nil); err != nil {
		t.Fatal(err)
	}
	ev, err := s.AppendWith("park-sb", Event{Kind: "sandbox.started"}, "", func(r *Sandbox) error { r.Parked = false; return nil })
	if err != nil || ev.Sequence != 2 {
		t.Fatalf("AppendWith = %+v, %v", ev, err)
	}
	if sb, _ := s.Get("park-sb"); sb.Parked || sb.LastSeq != 2 {
		t.Fatalf("the record after AppendWith: %+v", sb)
	}
	_, err = s.AppendWith("park-sb", Event{Kind: "sandbox.ready"}, StateReady, func(r *Sandbox) error { r.LastSeq = 9; return nil })
	if !errors.Is(err, errReadOnlyField) {
		t.Fatalf("a change of LastSeq: %v, want errReadOnlyField", err)
	}
	if sb, _ := s.Get("park-sb"); sb.LastSeq != 2 || sb.State != StatePending {
		t.Fatalf("a refused AppendWith wrote: %+v", sb)
	}
}
