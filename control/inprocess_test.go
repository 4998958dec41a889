package control_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/daemonfiles"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestInProcess runs the daemon in the test process (so -race sees its code)
// through a lifecycle with concurrent execs, followers, an Engine kill, stop,
// resume and delete.
func TestInProcess(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: binA, BuildID: buildA, Getenv: e.getenv, Owner: randHex(16)}
	c := startInProcess(t, e, rt)
	tctx := ctxT(t, 2*time.Minute)
	sb, err := c.Create(tctx, e.upRequest(""))
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID
	// A follower from the start sees every event once, in order.
	var wg sync.WaitGroup
	var followed []client.Event
	wg.Add(1)
	go func() {
		defer wg.Done()
		st, err := c.Events(tctx, id, 0, true)
		if err != nil {
			t.Error(err)
			return
		}
		defer st.Close()
		for {
			ev, err := st.Next()
			if err != nil {
				t.Errorf("follow: %v", err)
				return
			}
			followed = append(followed, ev)
			if ev.Kind == "sandbox.deleted" {
				return
			}
		}
	}()
	waitReady(t, c, id)
	var execs sync.WaitGroup
	for i := 0; i < 6; i++ {
		execs.Add(1)
		go func() {
			defer execs.Done()
			ex, err := c.Exec(tctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo hi"}})
			if err != nil {
				t.Error(err)
				return
			}
			if got, err := c.WaitExec(tctx, id, ex.ID); err != nil || got.ExitCode == nil || *got.ExitCode != 0 {
				t.Errorf("exec: %+v %v", got, err)
			}
		}()
		_, _ = c.List(tctx, nil)
	}
	execs.Wait()
	last, err := c.Get(tctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.docker.ContainerKill(tctx, "airlock-"+id, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	waitNext(t, c, id, last.LastSeq, "sandbox.stopped")
	rs, err := c.Resume(tctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitNext(t, c, id, rs.LastSeq, "sandbox.ready")
	if _, err := c.Stop(tctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, 30*time.Second, client.StateStopped)
	if _, err := c.Delete(tctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, 30*time.Second, client.StateDeleted)
	wg.Wait()
	assertContiguous(t, "followed", followed, 0)
	if all := allEvents(t, c, id); len(all) != len(followed) {
		t.Errorf("followed %d events, the history has %d", len(followed), len(all))
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// startInProcess runs a daemon over rt in the test process until the test ends.
func startInProcess(t *testing.T, e *env, rt *docker.Runtime) *client.Client {
	t.Helper()
	return startInProcessConfig(t, e, rt, control.Config{IdleTTL: time.Hour, ReapInterval: 100 * time.Millisecond})
}

// startInProcessConfig is startInProcess with the daemon's settings.
func startInProcessConfig(t *testing.T, e *env, rt *docker.Runtime, cfg control.Config) *client.Client {
	t.Helper()
	if rt.Owner == "" {
		// Without an owner key the daemon's reaper would take every orphan run
		// sandbox on the Engine, other tests' included (as no real daemon does).
		t.Fatal("an in-process daemon needs an owner key (docker.Runtime.Owner)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- control.Run(ctx, control.Options{Paths: e.paths, Version: "test", BuildID: "inproc", LogLevel: "debug",
			Service: func() (*control.Service, error) {
				st, err := store.Open(e.paths.Store())
				if err != nil {
					return nil, err
				}
				return control.NewService(st, rt, cfg), nil
			}})
	}()
	t.Cleanup(func() {
		if t.Failed() {
			// What the daemon saw of a failure (a request it answered with
			// a closed connection leaves no other trace).
			if b, err := os.ReadFile(daemonfiles.LogFile(e.paths)); err == nil {
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				t.Logf("the in-process daemon's log, last lines:\n%s", strings.Join(lines[max(0, len(lines)-80):], "\n"))
			}
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("control.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("control.Run did not return within 30 s of its context's end")
		}
	})
	c := client.New(e.paths.Socket())
	eventually(t, 20*time.Second, "the in-process daemon", func() bool {
		h, err := c.Health(context.Background())
		return err == nil && h.BuildID == "inproc"
	})
	return c
}
