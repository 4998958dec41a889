package supervisor

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// exitScripts are the three ways a launch ends in the policy table.
var exitScripts = map[string]string{
	"exit0":  "exit 0",
	"exit3":  "exit 3",
	"signal": "kill -KILL $$",
}

// TestRestartPolicyLaunches runs always / on-failure × exit 0 / exit 3 /
// killed by signal × max_restarts 0, 1, 2 and checks the launch count, the
// restart attempts and their linear delays (in units of 10 ms here).
func TestRestartPolicyLaunches(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{RestartAlways, RestartOnFailure} {
		for _, how := range []string{"exit0", "exit3", "signal"} {
			for _, maxR := range []int{0, 1, 2} {
				t.Run(fmt.Sprintf("%s/%s/max%d", policy, how, maxR), func(t *testing.T) {
					t.Parallel()
					restarts := policy == RestartAlways || how != "exit0"
					s := newSandbox(t)
					s.mainWaitsForStop()
					d := s.daemon("d", sh(fmt.Sprintf("echo launch >> %q; %s", s.path("launches"), exitScripts[how])))
					d.Restart, d.MaxRestarts = policy, ptr(maxR)
					s.start()
					switch {
					case !restarts:
						s.waitEvent("the not-restarted exit", func(e StatusEvent) bool {
							return e.Kind == KindDaemonExited && strings.HasPrefix(e.Reason, "not restarted")
						})
					case maxR == 0:
						s.waitFor("6 launches", func() bool { return len(filter(s.events(), "d", KindDaemonStarted)) >= 6 })
					default:
						s.waitEvent("gave_up", func(e StatusEvent) bool { return e.Kind == KindDaemonGaveUp })
					}
					s.stop()
					if r := s.wait(); r.code != 0 {
						t.Fatalf("exit code %d, stderr:\n%s", r.code, r.stderr)
					}
					evs := s.events()
					launches := countLines(s.read("launches"))
					started := filter(evs, "d", KindDaemonStarted)
					// Restarted without end, the stop can come between a
					// launch's start and its first command: one started
					// event more than launches then (seen on a loaded machine).
					if len(started) != launches && (maxR != 0 || !restarts || len(started) != launches+1) {
						t.Errorf("%d started events for %d launches", len(started), launches)
					}
					gaveUp := filter(evs, "d", KindDaemonGaveUp)
					switch {
					case !restarts:
						if launches != 1 || len(gaveUp) != 0 {
							t.Errorf("launches %d, gave_up %d; want 1 and 0", launches, len(gaveUp))
						}
					case maxR == 0:
						if len(started) < 6 || launches < len(started)-1 || len(gaveUp) != 0 {
							t.Errorf("started %d, launches %d, gave_up %d; want >= 6 started, as many launches (or one fewer) and 0", len(started), launches, len(gaveUp))
						}
					default:
						if launches != maxR+1 || len(gaveUp) != 1 {
							t.Errorf("launches %d, gave_up %d; want %d and 1", launches, len(gaveUp), maxR+1)
						}
					}
					for i, e := range filter(evs, "d", KindDaemonRestarting) {
						if e.Attempt != i+1 || e.DelayMS == nil || *e.DelayMS != int64(10*(i+1)) {
							t.Errorf("restart %d: attempt %d delay %v, want attempt %d delay %dms", i+1, e.Attempt, e.DelayMS, i+1, 10*(i+1))
						}
					}
					for _, e := range filter(evs, "d", KindDaemonExited) {
						switch how {
						case "signal":
							if e.Signal != "SIGKILL" || e.ExitCode != nil {
								t.Errorf("exited event %+v, want signal SIGKILL", e)
							}
						default:
							want := map[string]int{"exit0": 0, "exit3": 3}[how]
							if e.ExitCode == nil || *e.ExitCode != want {
								t.Errorf("exited event %+v, want exit code %d", e, want)
							}
						}
					}
					line := "✔ daemon d: shut down"
					if restarts && maxR > 0 {
						last := map[string]string{"exit0": "exit 0", "exit3": "exit 3", "signal": "killed by SIGKILL"}[how]
						line = fmt.Sprintf("✘ daemon d: gave up after %d launches (%s)", maxR+1, last)
					}
					if !strings.Contains(s.read("err.txt"), line+"\n") {
						t.Errorf("stderr lacks %q:\n%s", line, s.read("err.txt"))
					}
				})
			}
		}
	}
}

// TestRestartRealGaps uses the real one-second unit: the gap before restart n
// is at least n seconds (bounded from below only).
func TestRestartRealGaps(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.unit = 0 // the real unit
	s.mainWaitsForStop()
	d := s.daemon("d", sh("exit 3"))
	d.Restart, d.MaxRestarts = RestartAlways, ptr(2)
	s.start()
	s.stopAfter(KindDaemonGaveUp)
	evs := s.events()
	exited := filter(evs, "d", KindDaemonExited)
	started := filter(evs, "d", KindDaemonStarted)
	if len(started) != 3 || len(exited) != 3 {
		t.Fatalf("%d started, %d exited; want 3 and 3", len(started), len(exited))
	}
	for n := 1; n <= 2; n++ {
		gap := started[n].Time.Sub(exited[n-1].Time)
		if gap < time.Duration(n)*time.Second {
			t.Errorf("gap before restart %d is %v, want >= %ds", n, gap, n)
		}
	}
}

// TestRestartCountResets: a run that lasts long enough (60 s; 2 s here)
// resets the attempt count, and with it max_restarts.
func TestRestartCountResets(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.reset = 2 * time.Second
	s.mainWaitsForStop()
	count := s.path("launches")
	d := s.daemon("d", sh(fmt.Sprintf(`echo x >> %q; n=$(wc -l < %q); if [ "$n" -eq 2 ]; then sleep 3; fi; exit 3`, count, count)))
	d.Restart, d.MaxRestarts = RestartOnFailure, ptr(2)
	s.start()
	s.stopAfter(KindDaemonGaveUp)
	var attempts []int
	for _, e := range filter(s.events(), "d", KindDaemonRestarting) {
		attempts = append(attempts, e.Attempt)
	}
	if fmt.Sprint(attempts) != "[1 1 2]" {
		t.Errorf("restart attempts %v, want [1 1 2] (reset after the long run)", attempts)
	}
	if n := countLines(s.read("launches")); n != 4 {
		t.Errorf("%d launches, want 4", n)
	}
}

// TestStopDuringBackoff: a stop request during a backoff sleep ends the
// daemon at once, reported as shut down.
func TestStopDuringBackoff(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.unit = time.Hour
	s.mainWaitsForStop()
	s.daemon("d", sh("exit 1"))
	s.start()
	r := s.stopAfter(KindDaemonRestarting)
	if r.code != 0 || !strings.Contains(r.stderr, "✔ daemon d: shut down") {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	if r.elapsed > 20*time.Second {
		t.Errorf("took %v: the backoff sleep was not interrupted", r.elapsed)
	}
	if len(filter(s.events(), "d", KindDaemonStopped)) != 1 {
		t.Errorf("no daemon.stopped event")
	}
}

// TestFailedSpawnCountsAsAttempt: a missing binary is a failed launch that
// counts toward max_restarts, and without a ready check it blocks nothing.
func TestFailedSpawnCountsAsAttempt(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.mainWaitsForStop()
	d := s.daemon("ghost", []string{"/nonexistent/ghostd"})
	d.Restart, d.MaxRestarts = RestartAlways, ptr(1)
	s.start()
	r := s.stopAfter(KindDaemonGaveUp)
	if r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	exited := filter(s.events(), "ghost", KindDaemonExited)
	if len(exited) != 2 {
		t.Fatalf("%d exited events, want 2", len(exited))
	}
	for _, e := range exited {
		if !strings.HasPrefix(e.Reason, "cannot start") || e.PID != 0 {
			t.Errorf("exited event %+v, want a failed spawn", e)
		}
	}
	if log := s.read("logs/ghost/stderr.log"); strings.Count(log, "cannot start daemon ghost") != 2 {
		t.Errorf("stderr.log:\n%s", log)
	}
}

// TestMissingBinaryDoesNotBlockMain: the main command runs at once even when
// a daemon cannot start and restarts slowly.
func TestMissingBinaryDoesNotBlockMain(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.unit = time.Hour
	s.spec.Main.Argv = sh("exit 0")
	s.daemon("ghost", []string{"no-such-daemon-binary"})
	r := s.run()
	if r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	if r.elapsed > 20*time.Second {
		t.Errorf("took %v", r.elapsed)
	}
}
