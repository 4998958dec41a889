package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One-shot daemons: a setup step that runs once to completion before what
// names it in `after` and before the main command; its exit 0 is its
// readiness, any other end fails the start with 125.

// oneshot adds a one-shot daemon (no restart policy, no ready check).
func (s *sandbox) oneshot(name string, command []string) *Daemon {
	d := &Daemon{Name: name, Command: command, Cwd: s.dir, Timeout: ptr(5), Oneshot: true}
	s.spec.Daemons = append(s.spec.Daemons, d)
	return d
}

// TestOneshotGatesMain: a one-shot that writes a file late (after the daemon
// it names in after is ready) completes before a daemon that names it in
// after starts and before the main command, which reads the file. It is
// launched once, reported completed (not exited), and at shutdown it is not
// signalled: its line says it completed.
func TestOneshotGatesMain(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	schema := s.path("schema")
	db := s.daemon("db", sh(fmt.Sprintf("sleep 0.2; touch %q; echo up; exec sleep 100", s.path("db.up"))))
	db.Ready = &Ready{Log: "^up$", Timeout: "20s"}
	setup := s.oneshot("setup", sh(fmt.Sprintf("test -e %q || exit 9; echo loading; sleep 0.3; echo 'the schema' > %q; echo loaded >&2", s.path("db.up"), schema)))
	setup.After = []string{"db"}
	web := s.daemon("web", sh(fmt.Sprintf("test -e %q || exit 8; touch %q; exec sleep 100", schema, s.path("web.saw-schema"))))
	web.After = []string{"setup"}
	web.Ready = &Ready{Cmd: []string{"test", "-e", s.path("web.saw-schema")}, Timeout: "20s"}
	s.spec.Main.Argv = []string{"cat", schema}
	r := s.run()
	if r.code != 0 || r.stdout != "the schema\n" {
		t.Fatalf("code %d, stdout %q, stderr:\n%s\nsetup output:\n%s", r.code, r.stdout, r.stderr, s.read("logs/setup/output.log"))
	}
	evs := s.events()
	pos := map[string]int{}
	for i, e := range evs {
		if _, seen := pos[e.Kind+" "+e.Daemon]; !seen {
			pos[e.Kind+" "+e.Daemon] = i
		}
	}
	for _, order := range [][2]string{
		{"daemon.ready db", "daemon.started setup"},
		{"daemon.started setup", "daemon.completed setup"},
		{"daemon.completed setup", "daemon.started web"},
		{"daemon.completed setup", "supervisor.ready "},
	} {
		a, okA := pos[order[0]]
		b, okB := pos[order[1]]
		if !okA || !okB || a >= b {
			t.Errorf("want %s before %s; events: %v", order[0], order[1], pos)
		}
	}
	done := filter(evs, "setup", KindDaemonCompleted)
	if len(done) != 1 || done[0].PID == 0 || done[0].ExitCode == nil || *done[0].ExitCode != 0 {
		t.Errorf("daemon.completed events of setup: %+v; want one with its pid and exit code 0", done)
	}
	if n := len(filter(evs, "setup", KindDaemonStarted)); n != 1 {
		t.Errorf("setup launched %d times, want once", n)
	}
	for _, kind := range []string{KindDaemonExited, KindDaemonRestarting, KindDaemonKilled} {
		if evs := filter(evs, "setup", kind); len(evs) != 0 {
			t.Errorf("setup has %s events: %+v", kind, evs)
		}
	}
	// Not signalled at shutdown: it had exited.
	if st := filter(evs, "setup", KindDaemonStopped); len(st) != 1 || st[0].PID != 0 || st[0].Signal != "" {
		t.Errorf("setup's stopped events: %+v; want one without a pid or signal", st)
	}
	if !strings.Contains(r.stderr, "✔ daemon setup: completed\n") {
		t.Errorf("stderr lacks the completed line:\n%s", r.stderr)
	}
	// Its output went to its logs, as any daemon's.
	if got := s.read("logs/setup/stdout.log"); got != "loading\n" {
		t.Errorf("setup's stdout.log = %q", got)
	}
	if got := s.read("logs/setup/output.log"); got != "o loading\ne loaded\n" {
		t.Errorf("setup's output.log = %q", got)
	}
}

// TestOneshotChain: a one-shot may name another one-shot in after; both
// complete, in order, before the main command.
func TestOneshotChain(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	log := s.path("order")
	first := s.oneshot("first", sh(fmt.Sprintf("sleep 0.2; echo first >> %q", log)))
	first.Cwd = "/"
	second := s.oneshot("second", sh(fmt.Sprintf("echo second >> %q", log)))
	second.After = []string{"first"}
	s.spec.Main.Argv = sh(fmt.Sprintf("echo main >> %q", log))
	if r := s.run(); r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	if got := s.read("order"); got != "first\nsecond\nmain\n" {
		t.Errorf("order %q, want first, second, main", got)
	}
}

// TestOneshotFailureFailsStart: a one-shot that exits non-zero, is killed by a
// signal or cannot start fails the start with 125: the message names it, how
// it ended and (when it ran) the last lines of its output. It is not
// restarted, the daemon after it never starts, and the main command never
// runs.
func TestOneshotFailureFailsStart(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		command []string
		msg     string // after "airlock: daemon setup (oneshot) failed: "
		line    string // its shutdown line
	}{
		"exit": {
			// The pause orders the two streams in output.log: the
			// supervisor reads them apart, and writes that come at once
			// may be read in either order.
			sh("i=1; while [ $i -le 15 ]; do echo out-line-$i; i=$((i+1)); done; sleep 0.2; echo 'ERROR: relation \"t\" already exists' >&2; exit 3"),
			"exit code 3; see ", "✘ daemon setup: failed (exit 3)\n",
		},
		"signal":       {sh("echo about to die; kill -KILL $$"), "killed by SIGKILL; see ", "✘ daemon setup: failed (killed by SIGKILL)\n"},
		"cannot start": {[]string{"/nonexistent/setup-step"}, "cannot start: ", "✘ daemon setup: failed (cannot start)\n"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			s.spec.Main.Argv = sh(fmt.Sprintf("touch %q", s.path("main-ran")))
			s.oneshot("setup", c.command)
			web := s.daemon("web", sh("exec sleep 100"))
			web.After = []string{"setup"}
			r := s.run()
			if r.code != 125 {
				t.Fatalf("exit code %d, want 125; stderr:\n%s", r.code, r.stderr)
			}
			want := "airlock: daemon setup (oneshot) failed: " + c.msg
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
			if !strings.Contains(r.stderr, c.line) {
				t.Errorf("stderr lacks %q:\n%s", c.line, r.stderr)
			}
			if name == "exit" {
				logPath := filepath.Join(s.spec.LogDir, "setup", OutputLog)
				contains := []string{"; see " + logPath, "its last output lines:\n", "  out-line-15\n", "  out-line-7\n", `  ERROR: relation "t" already exists`}
				for _, w := range contains {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
					}
				}
				// The last 10 lines only, without the log's record tags.
				if strings.Contains(r.stderr, "out-line-6\n") || strings.Contains(r.stderr, "o out-line") {
					t.Errorf("stderr holds more than the last 10 lines, or record tags:\n%s", r.stderr)
				}
			}
			if _, err := os.Stat(s.path("main-ran")); err == nil {
				t.Errorf("the main command ran")
			}
			evs := s.events()
			if n := len(filter(evs, "setup", KindDaemonStarted)); name != "cannot start" && n != 1 {
				t.Errorf("setup launched %d times, want once", n)
			}
			exited := filter(evs, "setup", KindDaemonExited)
			if len(exited) != 1 {
				t.Fatalf("setup's exited events: %+v; want one", exited)
			}
			switch name {
			case "exit":
				if exited[0].ExitCode == nil || *exited[0].ExitCode != 3 {
					t.Errorf("exited event %+v, want exit code 3", exited[0])
				}
			case "signal":
				if exited[0].Signal != "SIGKILL" {
					t.Errorf("exited event %+v, want SIGKILL", exited[0])
				}
			}
			for _, kind := range []string{KindDaemonRestarting, KindDaemonCompleted, KindDaemonGaveUp} {
				if evs := filter(evs, "setup", kind); len(evs) != 0 {
					t.Errorf("setup has %s events: %+v", kind, evs)
				}
			}
			if evs := filter(evs, "web", KindDaemonStarted); len(evs) != 0 {
				t.Errorf("web started after a failed one-shot: %+v", evs)
			}
			failed := filter(evs, "", KindSupervisorFailed)
			if len(failed) != 1 || !strings.Contains(failed[0].Reason, "daemon setup (oneshot) failed: "+c.msg) {
				t.Errorf("supervisor.failed events: %+v", failed)
			}
		})
	}
}

// TestOneshotUser: a one-shot with user root runs as root while the main
// command runs as another user, and prepares what only root can (a file of
// mode 0600 given to the main command's user) before it starts. Needs root.
func TestOneshotUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to change user")
	}
	dir, err := os.MkdirTemp("", "oneshot-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "key")
	s := newSandbox(t)
	setup := s.oneshot("setup", sh(fmt.Sprintf("umask 077; echo \"made by $(id -u)\" > %q; chown 65534:65534 %q", key, key)))
	setup.User = "0:0"
	setup.Cwd = "/"
	s.spec.Main.User = "65534:65534"
	s.spec.Main.Cwd = "/"
	s.spec.Main.Argv = sh(fmt.Sprintf("echo \"main $(id -u)\"; cat %q", key))
	r := s.run()
	if r.code != 0 || r.stdout != "main 65534\nmade by 0\n" {
		t.Fatalf("code %d, stdout %q, stderr:\n%s\nsetup output:\n%s", r.code, r.stdout, r.stderr, s.read("logs/setup/output.log"))
	}
}

// TestOneshotSpecRules: a one-shot cannot have a ready check (its exit 0 is
// its readiness) nor a restart policy or max_restarts other than the
// defaults (it is never restarted).
func TestOneshotSpecRules(t *testing.T) {
	base := `{"version":1,"main":{"argv":["true"]},"daemons":[{"name":"setup","command":["x"],"oneshot":true%s}]}`
	for extra, want := range map[string]string{
		``:                             "",
		`,"restart":"always"`:          "",
		`,"max_restarts":10`:           "",
		`,"after":[]`:                  "",
		`,"ready":{"tcp":"a:1"}`:       "cannot use spec: daemons.setup.ready: a one-shot daemon has no ready check",
		`,"restart":"on-failure"`:      "cannot use spec: daemons.setup.restart: a one-shot daemon is never restarted",
		`,"max_restarts":0`:            "cannot use spec: daemons.setup.max_restarts: a one-shot daemon is never restarted",
		`,"max_restarts":3,"user":"x"`: "cannot use spec: daemons.setup.max_restarts: a one-shot daemon is never restarted",
	} {
		_, err := ParseSpec([]byte(fmt.Sprintf(base, extra)))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", extra, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", extra, err, want)
		}
	}
}
