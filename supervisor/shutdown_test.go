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

// trapTerm is a daemon that ignores SIGTERM (a sleep that inherits the
// ignored signal: a loop of short sleeps forked 20 processes a second).
const trapTerm = "trap '' TERM; echo up; exec sleep 1000"

// TestShutdownShutDownAndKilled: a daemon that exits on its signal reports
// "shut down"; one that traps it reports "killed" after its timeout, later.
func TestShutdownShutDownAndKilled(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.mainWaitsForStop()
	polite := s.daemon("polite", sh("exec sleep 100"))
	polite.Ready = &Ready{Cmd: []string{"true"}, Timeout: "20s"}
	stubborn := s.daemon("stubborn", sh(trapTerm))
	stubborn.Timeout = ptr(1)
	stubborn.Ready = &Ready{Log: "^up$", Timeout: "20s"}
	s.start()
	r := s.stopAfter(KindSupervisorReady)
	if r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	want := "✔ daemon polite: shut down\n✔ daemon stubborn: killed\n"
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr:\n%s\nwant, in this order:\n%s", r.stderr, want)
	}
	evs := s.events()
	exited := filter(evs, "", KindMainExited)[0].Time
	killed := filter(evs, "stubborn", KindDaemonKilled)
	if len(killed) != 1 || killed[0].Time.Sub(exited) < time.Second {
		t.Errorf("killed events %+v, main exited at %v: want one, >= 1s later", killed, exited)
	}
	if st := filter(evs, "polite", KindDaemonStopped); len(st) != 1 || st[0].Signal != "SIGTERM" {
		t.Errorf("polite stopped events: %+v", st)
	}
}

// TestShutdownParallel: five daemons that ignore SIGTERM stop together, in
// about the largest timeout rather than the sum of all.
func TestShutdownParallel(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.mainWaitsForStop()
	sum := 0
	for i := 1; i <= 5; i++ {
		d := s.daemon(fmt.Sprintf("d%d", i), sh(trapTerm))
		d.Timeout = ptr(1)
		d.Ready = &Ready{Log: "^up$", Timeout: "20s"}
		sum += *d.Timeout
	}
	s.start()
	r := s.stopAfter(KindSupervisorReady)
	if got := strings.Count(r.stderr, ": killed\n"); got != 5 {
		t.Fatalf("%d killed lines, want 5:\n%s", got, r.stderr)
	}
	evs := s.events()
	exited := filter(evs, "", KindMainExited)[0].Time
	var last time.Time
	for _, e := range filter(evs, "", KindDaemonKilled) {
		if e.Time.After(last) {
			last = e.Time
		}
	}
	took := last.Sub(exited)
	if took >= time.Duration(sum)*time.Second || took < time.Second {
		t.Errorf("shutdown took %v; want >= 1s and < the sum of the timeouts (%ds)", took, sum)
	}
}

// TestShutdownKillsGroup: the daemon's grandchild (in its process group)
// dies with it.
func TestShutdownKillsGroup(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.mainWaitsForStop()
	gcPid := s.path("gc.pid")
	inner := fmt.Sprintf(`trap "" TERM; echo $$ > %q; while :; do sleep 0.05; done`, gcPid)
	d := s.daemon("parent", sh(fmt.Sprintf("trap '' TERM; /bin/sh -c '%s' & wait", inner)))
	d.Timeout = ptr(1)
	s.start()
	s.waitFor("the grandchild", func() bool { return strings.HasSuffix(s.read("gc.pid"), "\n") })
	pid, err := strconv.Atoi(strings.TrimSpace(s.read("gc.pid")))
	if err != nil {
		t.Fatal(err)
	}
	if processGone(pid) {
		t.Fatalf("grandchild %d not running before the shutdown", pid)
	}
	s.stop()
	r := s.wait()
	if !strings.Contains(r.stderr, "✔ daemon parent: killed") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	s.waitFor("the grandchild to be gone", func() bool { return processGone(pid) })
}

// TestShutdownSignalAndGroupMember: the daemon's configured signal is the one
// sent; a daemon is shut down only when its whole group is gone.
func TestShutdownSignalAndGroupMember(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.mainWaitsForStop()
	d := s.daemon("intd", sh(fmt.Sprintf(`trap '' TERM; trap 'echo got INT > %q; exit 0' INT; : > %q; while :; do sleep 0.05; done`, s.path("int"), s.path("intd-trapped"))))
	d.Signal, d.Timeout = "SIGINT", ptr(10)
	// The leader exits on SIGTERM at once; its child lingers 0.5 s after it.
	lingering := s.daemon("linger", sh(fmt.Sprintf(`/bin/sh -c 'trap "sleep 0.5; exit 0" TERM; : > %q; while :; do sleep 0.05; done' & exec sleep 100`, s.path("linger-trapped"))))
	lingering.Timeout = ptr(10)
	s.start()
	s.waitFor("both started", func() bool { return len(filter(s.events(), "", KindDaemonStarted)) == 2 })
	// Both shells installed their traps (a signal before that would end them
	// at once, under load).
	s.waitFor("the traps", func() bool {
		_, e1 := os.Stat(s.path("intd-trapped"))
		_, e2 := os.Stat(s.path("linger-trapped"))
		return e1 == nil && e2 == nil
	})
	s.stop()
	r := s.wait()
	if !strings.Contains(r.stderr, "✔ daemon intd: shut down") || !strings.Contains(r.stderr, "✔ daemon linger: shut down") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if !strings.Contains(s.read("int"), "got INT") {
		t.Errorf("intd did not get SIGINT")
	}
	evs := s.events()
	exited := filter(evs, "", KindMainExited)[0].Time
	if st := filter(evs, "linger", KindDaemonStopped); len(st) != 1 || st[0].Time.Sub(exited) < 400*time.Millisecond {
		t.Errorf("linger stopped %+v, main exited %v: want after its lingering child", st, exited)
	}
}

// TestShutdownQuiet: the spec's quiet and the global -q flag silence the
// shutdown lines.
func TestShutdownQuiet(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"spec", "flag"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			s.daemon("d", sh("exec sleep 100"))
			if how == "spec" {
				s.spec.Quiet = true
			} else {
				s.args = []string{"-q"}
			}
			r := s.run()
			if r.code != 0 || r.stderr != "" {
				t.Errorf("code %d, stderr %q", r.code, r.stderr)
			}
		})
	}
}

// TestSigtermBeforeMain: SIGTERM while daemons are still getting ready shuts
// them down and exits 143 without running the main command.
func TestSigtermBeforeMain(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.spec.Main.Argv = sh(fmt.Sprintf("touch %q", s.path("main-ran")))
	d := s.daemon("slow", sh("exec sleep 100"))
	d.Ready = &Ready{Log: "never", Timeout: "60s"}
	s.start()
	s.waitEvent("started", func(e StatusEvent) bool { return e.Kind == KindDaemonStarted })
	s.signal(syscall.SIGTERM)
	r := s.wait()
	if r.code != 143 || !strings.Contains(r.stderr, "✔ daemon slow: shut down") {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(s.path("main-ran")); err == nil {
		t.Errorf("the main command ran")
	}
}
