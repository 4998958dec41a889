package supervisor

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestReadinessGatesMain: for each kind of check, a daemon that becomes
// ready late still comes before the main command, which can use it.
func TestReadinessGatesMain(t *testing.T) {
	t.Parallel()
	cases := map[string]func(s *sandbox){
		"tcp": func(s *sandbox) {
			addr := freeAddr(t)
			d := s.daemon("svc", helper(addr, "300ms"))
			d.Env = []EnvEntry{helperEntry("listen")}
			d.Ready = &Ready{TCP: addr, Timeout: "20s"}
			s.spec.Main.Argv = helper(addr)
			s.spec.Main.Env = []EnvEntry{helperEntry("dial")}
		},
		// The port opens at once, but the server answers a request only
		// later: a tcp check that sends one and expects the answer waits.
		"tcp send expect": func(s *sandbox) {
			addr := freeAddr(t)
			d := s.daemon("svc", helper(addr, "600ms"))
			d.Env = []EnvEntry{helperEntry("loading")}
			d.Ready = &Ready{TCP: addr, Send: "PING\r\n", Expect: "+PONG", Timeout: "20s"}
			s.spec.Main.Argv = helper(addr)
			s.spec.Main.Env = []EnvEntry{helperEntry("ping")}
		},
		"http": func(s *sandbox) {
			addr := freeAddr(t)
			d := s.daemon("svc", helper(addr, "300ms", "302"))
			d.Env = []EnvEntry{helperEntry("http")}
			d.Ready = &Ready{HTTP: "http://" + addr + "/health", Timeout: "20s"}
			s.spec.Main.Argv = helper("http://" + addr + "/health")
			s.spec.Main.Env = []EnvEntry{helperEntry("get")}
		},
		"cmd": func(s *sandbox) {
			d := s.daemon("svc", sh(fmt.Sprintf("sleep 0.3; touch %q; exec sleep 100", s.path("ok"))))
			d.Ready = &Ready{Cmd: []string{"test", "-e", s.path("ok")}, Timeout: "20s"}
			s.spec.Main.Argv = []string{"test", "-e", s.path("ok")}
		},
		"log": func(s *sandbox) {
			d := s.daemon("svc", sh(fmt.Sprintf("echo starting; sleep 0.3; touch %q; echo 'server listening on 1234' >&2; exec sleep 100", s.path("ok"))))
			d.Ready = &Ready{Log: `listening on \d+$`, Timeout: "20s"}
			s.spec.Main.Argv = []string{"test", "-e", s.path("ok")}
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			setup(s)
			r := s.run()
			if r.code != 0 {
				t.Fatalf("exit code %d, stderr:\n%s\nsvc stderr:\n%s", r.code, r.stderr, s.read("logs/svc/stderr.log"))
			}
			evs := s.events()
			ready, mainReady := -1, -1
			for i, e := range evs {
				switch e.Kind {
				case KindDaemonReady:
					ready = i
				case KindSupervisorReady:
					mainReady = i
				}
			}
			if ready < 0 || mainReady < ready {
				t.Errorf("daemon.ready at %d, supervisor.ready at %d", ready, mainReady)
			}
		})
	}
}

// TestReadinessFailure: a check that does not pass in time fails the start
// with 125 and a message naming the daemon, the check and its log; the main
// command never runs and the started daemon is shut down.
func TestReadinessFailure(t *testing.T) {
	t.Parallel()
	type tc struct {
		setup func(s *sandbox) *Ready
		msg   string // after "daemon svc "
	}
	cases := map[string]tc{
		"tcp": {func(s *sandbox) *Ready { return &Ready{TCP: freeAddr(t)} }, "not ready after 300ms (tcp "},
		"http": {func(s *sandbox) *Ready {
			addr := freeAddr(t)
			d := s.daemon("web", helper(addr, "0s", "500"))
			d.Env = []EnvEntry{helperEntry("http")}
			return &Ready{HTTP: "http://" + addr + "/"}
		}, "not ready after 300ms (http http://"},
		"tcp expect": {func(s *sandbox) *Ready {
			addr := freeAddr(t)
			d := s.daemon("db", helper(addr, "1h"))
			d.Env = []EnvEntry{helperEntry("loading")}
			return &Ready{TCP: addr, Send: "PING\r\n", Expect: "+PONG"}
		}, `not ready after 300ms (tcp `},
		"cmd":  {func(s *sandbox) *Ready { return &Ready{Cmd: []string{"false"}} }, "not ready after 300ms (cmd false)"},
		"log":  {func(s *sandbox) *Ready { return &Ready{Log: "never printed"} }, `not ready after 300ms (log "never printed")`},
		"gone": {func(s *sandbox) *Ready { return &Ready{Log: "never printed", Timeout: "30s"} }, `exited before it was ready (log "never printed")`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			s.spec.Main.Argv = sh(fmt.Sprintf("touch %q", s.path("main-ran")))
			ready := c.setup(s)
			if ready.Timeout == "" {
				ready.Timeout = "300ms"
			}
			script := "echo hello; exec sleep 100"
			if name == "gone" {
				script = "echo bye; exit 1"
			}
			d := s.daemon("svc", sh(script))
			d.Ready = ready
			d.MaxRestarts = ptr(1)
			r := s.run()
			if r.code != 125 {
				t.Fatalf("exit code %d, want 125; stderr:\n%s", r.code, r.stderr)
			}
			want := "airlock: daemon svc " + c.msg
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
			if name == "tcp expect" && !strings.Contains(r.stderr, `, sending "PING\r\n", expecting "+PONG")`) {
				t.Errorf("stderr does not say what the check sent and expected:\n%s", r.stderr)
			}
			logPath := s.spec.LogDir + "/svc/stderr.log"
			if !strings.Contains(r.stderr, "; see "+logPath) {
				t.Errorf("stderr does not name %s:\n%s", logPath, r.stderr)
			}
			if _, err := os.Stat(s.path("main-ran")); err == nil {
				t.Errorf("the main command ran")
			}
			line := "✔ daemon svc: shut down"
			if name == "gone" {
				line = "✘ daemon svc: gave up after 2 launches (exit 1)" // max_restarts 1
			}
			if !strings.Contains(r.stderr, line) {
				t.Errorf("stderr lacks %q:\n%s", line, r.stderr)
			}
			if len(filter(s.events(), "", KindSupervisorFailed)) != 1 {
				t.Errorf("no supervisor.failed event")
			}
		})
	}
}

// TestAfterOrder: a daemon starts only after the daemons it names are ready
// (with a check) or started (without one).
func TestAfterOrder(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.mainWaitsForStop()
	a := s.daemon("a", sh("sleep 0.3; echo up; exec sleep 100"))
	a.Ready = &Ready{Log: "^up$", Timeout: "20s"}
	s.daemon("plain", sh("exec sleep 100"))
	b := s.daemon("b", sh("exec sleep 100"))
	b.After = []string{"a", "plain"}
	s.start()
	s.waitEvent("b started", func(e StatusEvent) bool { return e.Kind == KindDaemonStarted && e.Daemon == "b" })
	s.stop()
	s.wait()
	pos := map[string]int{}
	for i, e := range s.events() {
		pos[e.Kind+" "+e.Daemon] = i
	}
	if !(pos["daemon.ready a"] < pos["daemon.started b"] && pos["daemon.started plain"] < pos["daemon.started b"]) {
		t.Errorf("order: %v", pos)
	}
}

// TestIndependentDaemonsStartInParallel: each one's ready check needs the
// other to run, which deadlocks unless both start without waiting.
func TestIndependentDaemonsStartInParallel(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	for _, n := range []string{"x", "y"} {
		other := map[string]string{"x": "y", "y": "x"}[n]
		d := s.daemon(n, sh(fmt.Sprintf("touch %q; exec sleep 100", s.path(n+".up"))))
		d.Ready = &Ready{Cmd: []string{"test", "-e", s.path(other + ".up")}, Timeout: "20s"}
	}
	if r := s.run(); r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestDaemonWithoutReadyDoesNotBlock: the main command does not wait for a
// daemon without a check, however long it would take.
func TestDaemonWithoutReadyDoesNotBlock(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.spec.Main.Argv = []string{"true"}
	s.daemon("slow", sh("sleep 100"))
	r := s.run()
	if r.code != 0 || r.elapsed > 20*time.Second {
		t.Fatalf("code %d after %v, stderr:\n%s", r.code, r.elapsed, r.stderr)
	}
}

// TestCmdPollWait: a cmd check pauses between tries at least 20 ms, as long as
// its last try took, and a tenth of the wait so far up to 50 ms.
func TestCmdPollWait(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct{ since, took, want time.Duration }{
		{0, ms, 20 * ms},
		{150 * ms, 2 * ms, 20 * ms},
		{400 * ms, 2 * ms, 40 * ms},
		{500 * ms, 70 * ms, 70 * ms},
		{time.Second, 0, 50 * ms},
		{30 * time.Second, ms, 50 * ms},
		{0, 5 * time.Second, 5 * time.Second},
	} {
		if got := cmdPollWait(c.since, c.took); got != c.want {
			t.Errorf("cmdPollWait(%v, %v) = %v, want %v", c.since, c.took, got, c.want)
		}
	}
}
