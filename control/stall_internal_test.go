package control

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/supervisor"
)

// stalledFollow is a Backend whose status follower never delivers a line (an
// exec whose output the Engine never passes on), while the stream in the
// container, read through the archive API, holds the supervisor's report.
type stalledFollow struct {
	stopRecorder
	stream []byte
	reads  atomic.Int32
}

func (*stalledFollow) Running(context.Context, string) bool { return true }

func (*stalledFollow) FollowStatus(ctx context.Context, _ string, _ int64) (io.ReadCloser, error) {
	pr, pw := io.Pipe()
	go func() { <-ctx.Done(); pw.Close() }()
	return pr, nil
}

func (b *stalledFollow) ReadFile(_ context.Context, _, _ string, from, limit int64) ([]byte, int64, error) {
	b.reads.Add(1)
	size := int64(len(b.stream))
	from = min(from, size)
	return b.stream[from:min(size, from+limit)], size, nil
}

// TestStalledFollowerCaughtUp: a pending sandbox whose status follower hangs
// still becomes ready from what its supervisor wrote, read from the container's
// filesystem, and that read stops once it is no longer pending.
func TestStalledFollowerCaughtUp(t *testing.T) {
	st, err := store.Open(t.TempDir() + "/ids.db")
	if err != nil {
		t.Fatal(err)
	}
	line, err := supervisor.StatusEvent{Time: time.Now(), Kind: supervisor.KindSupervisorReady}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	rt := &stalledFollow{stream: append(line, '\n')}
	s := NewService(st, rt, Config{})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	t.Cleanup(func() { s.cancel(); s.wg.Wait(); _ = st.Close() })
	defer func(d time.Duration) { stallCheck = d }(stallCheck)
	stallCheck = 50 * time.Millisecond

	rec, _, err := st.CreateSandbox(store.Sandbox{Kind: "up"}, store.Event{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(rec.ID, func(sb *store.Sandbox) error { sb.ContainerID = "c0ffee"; return nil }); err != nil {
		t.Fatal(err)
	}
	s.events.emit(rec.ID, store.Event{Kind: "sandbox.started"}, "")
	s.status.startTailAt(rec.ID, s.lives.of(rec.ID), 0)

	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := st.Get(rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == store.StateReady {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a sandbox whose follower hangs is still %s after 30 s", got.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := kinds(t, s, rec.ID)["sandbox.ready"]; n != 1 {
		t.Errorf("sandbox.ready recorded %d times, want once", n)
	}
	// Ready: the archive is not read again.
	reads := rt.reads.Load()
	time.Sleep(10 * stallCheck)
	if n := rt.reads.Load(); n > reads+1 {
		t.Errorf("the stream was read %d more times after the sandbox got ready", n-reads)
	}
}
