package supervisor

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pidsIn reads the pids a daemon recorded, one a line.
func pidsIn(t *testing.T, s *sandbox, name string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(s.read(name)) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pids = append(pids, p)
	}
	return pids
}

// killAtEnd SIGKILLs the recorded pids when the test ends, so a failing test
// leaves no strays behind.
func killAtEnd(t *testing.T, s *sandbox, name string) {
	t.Cleanup(func() {
		for _, p := range pidsIn(t, s, name) {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); err == nil && strings.Contains(string(b), "777") {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
}

// TestLeaderExitStopsGroup: a daemon whose leader exits at once and leaves a
// `sleep 777` behind: before each new launch the previous launch's sleep is
// gone, none is left once it gave up, and the shutdown reports it gave up.
func TestLeaderExitStopsGroup(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.mainWaitsForStop()
	pids, strays := s.path("pids"), s.path("strays")
	// Each launch first records every earlier sleep 777 still running.
	script := fmt.Sprintf(`for p in $(cat %q 2>/dev/null); do grep -q 777 /proc/$p/cmdline 2>/dev/null && echo $p >> %q; done; sleep 777 & echo $! >> %q; exit 0`, pids, strays, pids)
	d := s.daemon("forky", sh(script))
	d.Restart, d.MaxRestarts = RestartAlways, ptr(3)
	killAtEnd(t, s, "pids")
	s.start()
	s.waitEvent("gave_up", func(e StatusEvent) bool { return e.Kind == KindDaemonGaveUp })
	if got := s.read("strays"); got != "" {
		t.Errorf("sleep 777 of an earlier launch still running at a new launch: %q", got)
	}
	launched := pidsIn(t, s, "pids")
	if len(launched) != 4 {
		t.Fatalf("%d launches recorded, want 4", len(launched))
	}
	for _, p := range launched {
		if !processGone(p) {
			t.Errorf("sleep 777 (pid %d) still running after the daemon gave up", p)
		}
	}
	s.stop()
	r := s.wait()
	if r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "daemon forky: shut down") {
		t.Errorf("a daemon that gave up is reported as shut down:\n%s", r.stderr)
	}
	if log := s.read("logs/forky/stderr.log"); !strings.Contains(log, "its leader exited") {
		t.Errorf("stderr.log does not say the group was stopped:\n%s", log)
	}
}

// TestLeaderExitSignalThenKill: the rest of the group gets the daemon's own
// signal first and SIGKILL after its timeout; at shutdown the line is printed
// only once the whole group is gone.
func TestLeaderExitSignalThenKill(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.mainWaitsForStop()
	got, pids := s.path("got"), s.path("pids")
	// The stray records its pid once its traps are set; the leader exits then.
	inner := fmt.Sprintf(`trap "echo USR1 >> %s" USR1; trap "" TERM; echo $$ > %s; while :; do sleep 0.05; done`, got, pids)
	d := s.daemon("stubborn", sh(fmt.Sprintf(`/bin/sh -c '%s' 777 & while [ ! -s %q ]; do sleep 0.01; done; exit 0`, inner, pids)))
	d.Signal, d.Timeout = "SIGUSR1", ptr(1)
	d.Restart = RestartOnFailure
	killAtEnd(t, s, "pids")
	s.start()
	exited := s.waitEvent("the leader's exit", func(e StatusEvent) bool { return e.Kind == KindDaemonExited })
	s.stop()
	r := s.wait()
	if r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	stray := pidsIn(t, s, "pids")
	if len(stray) != 1 {
		t.Fatalf("pids %v, want one", stray)
	}
	// Checked at once: the supervisor has exited, so the stray must have been
	// gone before its shutdown line.
	if !processGone(stray[0]) {
		t.Errorf("the stray %d outlived the supervisor; stderr:\n%s", stray[0], r.stderr)
	}
	if !strings.Contains(r.stderr, "✔ daemon stubborn: shut down") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if !strings.Contains(s.read("got"), "USR1") {
		t.Errorf("the stray did not get the daemon's signal (SIGUSR1) first")
	}
	stopped := filter(s.events(), "stubborn", KindDaemonStopped)
	if len(stopped) != 1 || stopped[0].Time.Sub(exited.Time) < 900*time.Millisecond {
		t.Errorf("stopped %+v, leader exited at %v: want it after the 1 s timeout", stopped, exited.Time)
	}
}

// TestGaveUpLineAtShutdown: a daemon that gave up is reported as such, with
// its launches and last exit, not as shut down.
func TestGaveUpLineAtShutdown(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.mainWaitsForStop()
	d := s.daemon("flaky", sh("exit 3"))
	d.Restart, d.MaxRestarts = RestartAlways, ptr(2)
	s.daemon("web", sh("exec sleep 100"))
	s.start()
	r := s.stopAfter(KindDaemonGaveUp)
	if r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"✘ daemon flaky: gave up after 3 launches (exit 3)\n", "✔ daemon web: shut down\n"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "daemon flaky: shut down") {
		t.Errorf("flaky reported as shut down:\n%s", r.stderr)
	}
}

// TestEveryDaemonSpawnedBeforeMain: daemons without a ready check (a chain of
// `after`, and one after a daemon with a check) are all started before the
// main command: their daemon.started events come before supervisor.ready, and
// their processes run when the main command starts.
func TestEveryDaemonSpawnedBeforeMain(t *testing.T) {
	t.Parallel()
	for i := 0; i < 3; i++ {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			// The main command checks the pid of every daemon.started event
			// written so far, then copies the stream.
			s.spec.Main.Argv = sh(fmt.Sprintf(`for p in $(grep -o '"pid":[0-9]*' %q | cut -d: -f2); do [ -d /proc/$p ] || echo "no $p"; done > %q; cp %q %q`,
				s.spec.StatusFile, s.path("missing"), s.spec.StatusFile, s.path("at-main.jsonl")))
			names := []string{"a", "b", "c", "d", "e", "f"}
			for j, n := range names {
				d := s.daemon(n, sh("exec sleep 100"))
				if j > 0 && j < 4 {
					d.After = []string{names[j-1]} // a <- b <- c <- d
				}
			}
			r := s.daemon("r", sh("exec sleep 100"))
			r.Ready = &Ready{Cmd: []string{"true"}, Timeout: "20s"}
			late := s.daemon("late", sh("exec sleep 100"))
			late.After = []string{"r"}
			res := s.run()
			if res.code != 0 {
				t.Fatalf("code %d, stderr:\n%s", res.code, res.stderr)
			}
			evs := s.events()
			ready := -1
			started := map[string]int{}
			for k, e := range evs {
				switch e.Kind {
				case KindSupervisorReady:
					ready = k
				case KindDaemonStarted:
					started[e.Daemon] = k
				}
			}
			for _, n := range append(names, "r", "late") {
				k, ok := started[n]
				if !ok || ready < 0 || k > ready {
					t.Errorf("daemon %s started at event %d (present %v), supervisor.ready at %d", n, k, ok, ready)
				}
			}
			if got := s.read("missing"); got != "" {
				t.Errorf("daemon processes not running when the main command started: %q", got)
			}
			f, err := os.Open(s.path("at-main.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			atMain, _ := ReadStatus(f)
			if n := len(filter(atMain, "", KindDaemonStarted)); n != len(names)+2 {
				t.Errorf("%d daemon.started events when the main command started, want %d", n, len(names)+2)
			}
		})
	}
}
