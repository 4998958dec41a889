package control

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
)

// restartedEngine is a backend whose one primary runs or not, as the test
// says, and whose status stream cannot be read.
type restartedEngine struct {
	stopRecorder
	running atomic.Bool
	// exited: the Engine says the primary exited though processes of it
	// are still counted (running says so).
	exited atomic.Bool
}

func (b *restartedEngine) Running(context.Context, string) bool { return b.running.Load() }

func (b *restartedEngine) ExitCode(context.Context, string) *int {
	if b.running.Load() && !b.exited.Load() {
		return nil
	}
	code := 143
	return &code
}

func (b *restartedEngine) PrimaryEnd(ctx context.Context, id string, _ int) (*int, string, bool) {
	code := b.ExitCode(ctx, id)
	return code, "", code != nil
}

func (*restartedEngine) ReadFile(context.Context, string, string, int64, int64) ([]byte, int64, error) {
	return nil, 0, nil // an empty status stream
}

func (*restartedEngine) FollowStatus(context.Context, string, int64) (io.ReadCloser, error) {
	return nil, errors.New("no stream in this test")
}

// TestStaleDieAfterResume (the TypeScript SDK's "stop and resume" test, under
// load in CI): the Engine's die event of a stop reached the daemon's watcher
// only after the sandbox was resumed. The stop had been recorded already, and
// the resume cleared the stop's mark, so the late event was taken for a death
// of the new run: the resumed sandbox was recorded stopped ("exited") right
// after it got ready, or failed when it came between its start and its ready.
// A death the Engine reports of a primary that runs again belongs to an
// earlier run and changes nothing; a real one is still recorded.
func TestStaleDieAfterResume(t *testing.T) {
	code := 143
	die := func(s *Service, id string) {
		s.status.onPrimaryEvent(backend.PrimaryEvent{SandboxID: id, Died: true, ExitCode: &code})
		s.wg.Wait()
	}
	newSandbox := func(t *testing.T) (*Service, *store.Store, *restartedEngine, string) {
		// Resumed: its primary runs again.
		return runningSandbox(t, store.Event{Kind: "sandbox.started"}, store.Event{Kind: "sandbox.ready"},
			store.Event{Kind: "sandbox.stopped", Reason: "stopped"}, store.Event{Kind: "sandbox.started"})
	}

	t.Run("after ready", func(t *testing.T) {
		s, st, rt, id := newSandbox(t)
		appendHistory(t, st, id, store.Event{Kind: "sandbox.ready"})
		die(s, id)
		if got, _ := st.Get(id); got.State != store.StateReady {
			t.Fatalf("a resumed sandbox, ready, after its previous run's die event: state %s (%s), want ready", got.State, got.Reason)
		}
		// Its own death later is recorded.
		rt.running.Store(false)
		die(s, id)
		if got, _ := st.Get(id); got.State != store.StateStopped || got.Reason != "exited" {
			t.Errorf("its primary died: state %s (%s), want stopped (exited)", got.State, got.Reason)
		}
	})
	// e2e.TestRunOOMKilledIsRemoved: the primary's init was killed, the
	// Engine reported its death, and processes of it were still counted in
	// its cgroup for a moment: the death is its own, not an earlier run's.
	t.Run("its processes linger", func(t *testing.T) {
		s, st, rt, id := newSandbox(t)
		appendHistory(t, st, id, store.Event{Kind: "sandbox.ready"})
		rt.exited.Store(true)
		die(s, id)
		if got, _ := st.Get(id); got.State != store.StateStopped {
			t.Errorf("the Engine says its primary exited, its cgroup still counts processes: state %s, want stopped", got.State)
		}
	})
	t.Run("before ready", func(t *testing.T) {
		s, st, rt, id := newSandbox(t)
		die(s, id)
		if got, _ := st.Get(id); got.State == store.StateFailed {
			t.Fatalf("a resumed sandbox, not yet ready, after its previous run's die event: failed (%s)", got.Reason)
		}
		rt.running.Store(false)
		die(s, id)
		if got, _ := st.Get(id); got.State != store.StateFailed {
			t.Errorf("its primary died before it was ready: state %s, want failed", got.State)
		}
	})
}

// TestTakenAwayWhileReportedRunning (e2e/kube's TestNodeLost and
// TestEvictedPod): a primary the backend took away (its Pod evicted, its node
// lost) fails the sandbox though the backend still reports it running (the
// Pod of a lost node reads Running until it is collected).
func TestTakenAwayWhileReportedRunning(t *testing.T) {
	s, st, _, id := runningSandbox(t, store.Event{Kind: "sandbox.started"}, store.Event{Kind: "sandbox.ready"})
	s.status.onPrimaryEvent(backend.PrimaryEvent{SandboxID: id, Died: true, Reason: "evicted from node n1"})
	s.wg.Wait()
	if got, _ := st.Get(id); got.State != store.StateFailed || got.Reason != "evicted from node n1" {
		t.Errorf("after the backend took its primary away: state %s (%s), want failed with the reason", got.State, got.Reason)
	}
}

// runningSandbox is a service over a restartedEngine whose primary runs, and
// the record of a sandbox in it with history after sandbox.accepted.
func runningSandbox(t *testing.T, history ...store.Event) (*Service, *store.Store, *restartedEngine, string) {
	t.Helper()
	rt := &restartedEngine{}
	rt.running.Store(true)
	s, st := startedService(t, rt)
	rec, _, err := st.CreateSandbox(store.Sandbox{Kind: backend.KindUp, ContainerID: "primary"}, store.Event{Kind: "sandbox.accepted"})
	if err != nil {
		t.Fatal(err)
	}
	appendHistory(t, st, rec.ID, history...)
	return s, st, rt, rec.ID
}

// appendHistory records evs, each in the state its kind brings.
func appendHistory(t *testing.T, st *store.Store, id string, evs ...store.Event) {
	t.Helper()
	for _, ev := range evs {
		state := ""
		switch ev.Kind {
		case "sandbox.ready":
			state = store.StateReady
		case "sandbox.stopped":
			state = store.StateStopped
		}
		if _, err := st.Append(id, ev, state); err != nil {
			t.Fatal(err)
		}
	}
}
