package control

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
)

// TestPauseNotSupported: a backend that cannot pause (Kubernetes') answers a
// pause, an unpause and on_idle "pause" with not_supported, 501, saying so;
// the record is left as it was.
func TestPauseNotSupported(t *testing.T) {
	s, st := startedService(t, &stopRecorder{})
	rec, _, err := st.CreateSandbox(store.Sandbox{Kind: backend.KindUp}, store.Event{Kind: "sandbox.accepted"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(rec.ID, store.Event{Kind: "sandbox.ready"}, store.StateReady); err != nil {
		t.Fatal(err)
	}
	pause := expirePause
	for what, err := range map[string]error{
		"pause":           func() error { _, err := s.Pause(rec.ID, ""); return err }(),
		"unpause":         func() error { _, err := s.Unpause(rec.ID); return err }(),
		"on_idle = pause": func() error { _, err := s.UpdateLifetime(rec.ID, LifetimeUpdate{OnIdle: &pause}); return err }(),
	} {
		ce := apiError(err)
		if err == nil || ce.Status != http.StatusNotImplemented || ce.Reason != client.ReasonNotSupported || !strings.HasPrefix(ce.Message, "cannot ") && !strings.HasPrefix(ce.Message, "on_idle: ") {
			t.Errorf("%s on a backend that cannot pause: %v (%d %s), want 501 not_supported", what, err, ce.Status, ce.Reason)
		}
	}
	if got, _ := st.Get(rec.ID); got.State != store.StateReady || got.OnIdle != "" {
		t.Errorf("the record after refused pauses: %s, on_idle %q", got.State, got.OnIdle)
	}
}

// pausingEngine is followCounter that can pause, and whose primary the
// Engine reports in state.
type pausingEngine struct {
	followCounter
	state    string
	unpauses int
}

func (b *pausingEngine) Get(context.Context, string) (*backend.Info, error) {
	return &backend.Info{State: b.state}, nil
}
func (b *pausingEngine) Pause(context.Context, string) error { b.state = "paused"; return nil }
func (b *pausingEngine) Unpause(context.Context, string) error {
	b.unpauses++
	b.state = "running"
	return nil
}

// TestRecoverPaused: a daemon that starts records what the Engine holds: a
// ready sandbox found paused becomes paused (its daemon went between the
// freeze and its record), and is not followed while frozen; unpaused, it is
// ready and followed; a paused one found running is ready again and followed.
func TestRecoverPaused(t *testing.T) {
	rt := &pausingEngine{state: "paused"}
	s, st := startedService(t, rt)
	mk := func(state string) string {
		rec, _, err := st.CreateSandbox(store.Sandbox{Kind: backend.KindUp}, store.Event{Kind: "sandbox.accepted"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Update(rec.ID, func(r *store.Sandbox) error { r.ContainerID = "c-" + rec.ID; return nil }); err != nil {
			t.Fatal(err)
		}
		for _, st2 := range []string{store.StateReady, state} {
			if _, err := st.Append(rec.ID, store.Event{Kind: "sandbox." + st2}, st2); err != nil {
				t.Fatal(err)
			}
		}
		return rec.ID
	}
	id := mk(store.StateReady)
	s.recovery.recover()
	got, _ := st.Get(id)
	if got.State != store.StatePaused || got.Reason != "found paused" {
		t.Fatalf("a ready sandbox found paused: %s (%s), want paused (found paused)", got.State, got.Reason)
	}
	time.Sleep(100 * time.Millisecond)
	if n := rt.follows.Load(); n != 0 {
		t.Errorf("a frozen sandbox's stream was followed %d times", n)
	}
	if _, err := s.Unpause(id); err != nil {
		t.Fatal(err)
	}
	waitFollows(t, &rt.follows, 1)

	rt.state = "running"
	id2 := mk(store.StatePaused)
	before := rt.follows.Load()
	s.recovery.recover()
	if got, _ := st.Get(id2); got.State != store.StateReady || got.Reason != "found running" {
		t.Fatalf("a paused sandbox found running: %s (%s), want ready (found running)", got.State, got.Reason)
	}
	waitFollows(t, &rt.follows, before+1)
}

// waitFollows waits until n reached want.
func waitFollows(t *testing.T, n interface{ Load() int32 }, want int32) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); n.Load() < want; {
		if time.Now().After(deadline) {
			t.Fatal(errors.New("the status stream was not followed"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
