package control

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
)

// parkedRunning is a Backend whose containers all run (a parked sandbox's
// supervisor waits for its claim) and which records removals.
type parkedRunning struct {
	stopRecorder
	mu      sync.Mutex
	removed []string
}

func (*parkedRunning) Running(context.Context, string) bool { return true }

func (b *parkedRunning) Remove(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.removed = append(b.removed, id)
	return nil
}

// TestRecoverClaimNeverSent (make faults' TestPoolKillDaemon, killed right
// after sandbox.accepted): a daemon that took a parked sandbox for a run and
// recorded its container, but went away before pool.claimed (so before it
// sent the claim), left a supervisor that waits for a claim nobody will
// send. The next daemon must not take it for started (its CLI then waited
// for a start forever): it fails it, saying why, and removes it.
func TestRecoverClaimNeverSent(t *testing.T) {
	rt := &parkedRunning{}
	s, st := startedService(t, rt)

	// The CLI is this process: alive.
	rec, _, err := st.CreateSandbox(store.Sandbox{Kind: backend.KindRun, Parked: true, CLIPid: os.Getpid()}, store.Event{Kind: "sandbox.accepted"})
	if err != nil {
		t.Fatal(err)
	}
	id := rec.ID
	if _, err := st.Append(id, store.Event{Kind: "sandbox.preparing"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(id, func(r *store.Sandbox) error { r.ContainerID = "parked-container"; return nil }); err != nil {
		t.Fatal(err)
	}

	s.recovery.recover()
	s.wg.Wait()
	got, err := st.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.StateFailed || got.Reason != "the daemon restarted before the pooled sandbox got its command" {
		t.Fatalf("after recovery: state %q, reason %q; want failed, the claim never sent", got.State, got.Reason)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.removed) != 1 || rt.removed[0] != id {
		t.Errorf("removed %v, want [%s]", rt.removed, id)
	}
}

// followCounter is parkedRunning whose status stream cannot be read (the
// follower tries again later) and counts the attempts.
type followCounter struct {
	parkedRunning
	follows atomic.Int32
}

func (b *followCounter) FollowStatus(context.Context, string, int64) (io.ReadCloser, error) {
	b.follows.Add(1)
	return nil, errors.New("no stream in this test")
}

// TestResumeFindsStartedByTheDaemonKilled (e2e's
// TestRunSurvivesDaemonKillInSetup/sandbox.created, under load): the daemon
// killed just after sandbox.created had its start call in flight; the Engine
// started the container after the next daemon's recovery found it created,
// not running. The CLI's resume then finds it running: it must be recorded
// as started and its status followed, as recovery does, or the CLI waits for
// a start that nobody records.
func TestResumeFindsStartedByTheDaemonKilled(t *testing.T) {
	rt := &followCounter{}
	s, st := startedService(t, rt)

	rec, _, err := st.CreateSandbox(store.Sandbox{Kind: backend.KindUp}, store.Event{Kind: "sandbox.accepted"})
	if err != nil {
		t.Fatal(err)
	}
	id := rec.ID
	if _, err := st.Update(id, func(r *store.Sandbox) error { r.ContainerID = "started-late"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(id, store.Event{Kind: "sandbox.created"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resume(id, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, _ := st.Events(id, 0)
		started := slices.ContainsFunc(evs, func(e store.Event) bool { return e.Kind == "sandbox.started" })
		if started && rt.follows.Load() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the resume: events %v, %d follow(s) of the status; want sandbox.started and a follower", evs, rt.follows.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startedService is a service over a store in a temporary dir and rt, running
// until the test ends.
func startedService(t *testing.T, rt backend.Backend) (*Service, *store.Store) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "ids.db"))
	if err != nil {
		t.Fatal(err)
	}
	s := NewService(st, rt, Config{})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() { s.cancel(); s.wg.Wait(); _ = st.Close() })
	return s, st
}
