package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"syscall"
	"testing"
)

// TestExitCodes: the supervisor exits with the main command's code, 128+N
// after signal N, 127 when it is not found and 126 when not executable.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	notExec := func(s *sandbox) []string {
		p := s.path("script.sh")
		if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return []string{p}
	}
	cases := []struct {
		name string
		argv func(s *sandbox) []string
		code int
		msg  string
	}{
		{"zero", func(*sandbox) []string { return sh("exit 0") }, 0, ""},
		{"seven", func(*sandbox) []string { return sh("exit 7") }, 7, ""},
		{"sigterm", func(*sandbox) []string { return sh("kill -TERM $$") }, 143, ""},
		{"not-found", func(*sandbox) []string { return []string{"no-such-command-xyz"} }, 127, "airlock: cannot run main command no-such-command-xyz: no-such-command-xyz: not found"},
		{"not-found-path", func(*sandbox) []string { return []string{"/nonexistent/cmd"} }, 127, "airlock: cannot run main command /nonexistent/cmd"},
		{"not-executable", notExec, 126, "not executable"},
		{"directory", func(s *sandbox) []string { return []string{s.dir} }, 126, "not executable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			s.spec.Main.Argv = c.argv(s)
			s.daemon("d", sh("exec sleep 100"))
			r := s.run()
			if r.code != c.code {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", r.code, c.code, r.stderr)
			}
			if c.msg != "" && !strings.Contains(r.stderr, c.msg) {
				t.Errorf("stderr lacks %q:\n%s", c.msg, r.stderr)
			}
			if !strings.Contains(r.stderr, "✔ daemon d: shut down") {
				t.Errorf("the daemon was not shut down:\n%s", r.stderr)
			}
			if c.code < 126 {
				exited := filter(s.events(), "", KindMainExited)
				if len(exited) != 1 || *exited[0].ExitCode != c.code {
					t.Errorf("main.exited events %+v", exited)
				}
			}
		})
	}
}

// TestDaemonStateDoesNotChangeExitCode: a daemon that fails does not change
// the main command's code.
func TestDaemonStateDoesNotChangeExitCode(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.spec.Main.Argv = sh(fmt.Sprintf("while ! grep -q gave_up %q; do sleep 0.01; done; exit 0", s.spec.StatusFile))
	d := s.daemon("bad", sh("exit 9"))
	d.MaxRestarts = ptr(1)
	if r := s.run(); r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestSignalsForwarded: the six forwarded signals reach the main command.
func TestSignalsForwarded(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	rec := s.path("signals")
	s.spec.Main.Argv = helper(rec)
	s.spec.Main.Env = []EnvEntry{helperEntry("signals")}
	s.start()
	s.waitFor("the main command", func() bool { _, err := os.Stat(rec + ".armed"); return err == nil })
	for _, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGINT, syscall.SIGTERM} {
		s.signal(sig)
		s.waitFor("signal "+sig.String(), func() bool { return strings.Contains(s.read("signals"), signalName(sig)+"\n") })
	}
	if r := s.wait(); r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestEnvAndCwd: a daemon gets the image env plus its own env (not the main
// command's), stdin /dev/null and its cwd; the main command gets the image env
// plus its own, and its cwd.
func TestEnvAndCwd(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.env = append(os.Environ(), "IMAGE_VAR=image", "SHARED=from-image")
	if err := os.Mkdir(s.path("work"), 0o755); err != nil {
		t.Fatal(err)
	}
	dump := func(name string) string {
		// Written whole, then renamed: the daemon's readiness check looks
		// for the file, and a half-written one let the main command (and so
		// the sandbox) end before the daemon had written its cwd.
		return fmt.Sprintf(`{ env; pwd; if read x; then echo STDIN=data; else echo STDIN=eof; fi; } > %q && mv %q %q`, s.path(name)+".part", s.path(name)+".part", s.path(name))
	}
	d := s.daemon("d", sh(dump("daemon.env")+"; exec sleep 100"))
	d.Env = []EnvEntry{literal("OWN", "daemon"), literal("SHARED", "from-daemon")}
	d.Cwd = s.path("work")
	d.Ready = &Ready{Cmd: []string{"test", "-s", s.path("daemon.env")}, Timeout: "20s"}
	s.spec.Main.Argv = sh(dump("main.env") + " < /dev/null")
	s.spec.Main.Env = []EnvEntry{literal("MAIN_ONLY", "main")}
	s.spec.Main.Cwd = s.dir
	if r := s.run(); r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	de, me := s.read("daemon.env"), s.read("main.env")
	for _, want := range []string{"IMAGE_VAR=image\n", "OWN=daemon\n", "SHARED=from-daemon\n", "\n" + s.path("work") + "\n", "STDIN=eof"} {
		if !strings.Contains(de, want) {
			t.Errorf("daemon env lacks %q:\n%s", want, de)
		}
	}
	if strings.Contains(de, "MAIN_ONLY") {
		t.Errorf("daemon got the main command's env")
	}
	for _, want := range []string{"IMAGE_VAR=image\n", "MAIN_ONLY=main\n", "SHARED=from-image\n", "\n" + s.dir + "\n"} {
		if !strings.Contains(me, want) {
			t.Errorf("main env lacks %q:\n%s", want, me)
		}
	}
	if strings.Contains(me, "OWN=") {
		t.Errorf("main got the daemon's env")
	}
}

// TestHarden: harden = true sets no_new_privs for that process only.
func TestHarden(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	nnp := func(file string) string {
		return fmt.Sprintf("grep NoNewPrivs /proc/self/status > %q", s.path(file))
	}
	for _, h := range []bool{true, false} {
		name := fmt.Sprintf("h%v", h)
		d := s.daemon(name, sh(nnp(name)+"; exec sleep 100"))
		d.Harden = ptr(h)
		d.Ready = &Ready{Cmd: []string{"test", "-s", s.path(name)}, Timeout: "20s"}
	}
	s.spec.Main.Argv = sh(nnp("main"))
	s.spec.Main.Harden = ptr(false)
	if r := s.run(); r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	for file, want := range map[string]string{"htrue": "1", "hfalse": "0", "main": "0"} {
		if got := strings.Fields(s.read(file)); len(got) != 2 || got[1] != want {
			t.Errorf("%s: NoNewPrivs %v, want %s", file, got, want)
		}
	}
	s2 := newSandbox(t)
	s2.spec.Main.Argv = sh("grep NoNewPrivs /proc/self/status")
	if r := s2.run(); !strings.Contains(r.stdout, "NoNewPrivs:\t1") {
		t.Errorf("hardened main: %q", r.stdout)
	}
}

// TestUser: main.user runs the main command as that UID:GID (needs root).
func TestUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to change user")
	}
	if _, err := user.LookupId("65534"); err != nil {
		t.Logf("uid 65534 has no passwd entry; using it anyway")
	}
	s := newSandbox(t)
	s.spec.Main.Argv = sh("echo $(id -u):$(id -g)")
	s.spec.Main.Cwd = "/"
	s.spec.Main.User = "65534:65534"
	r := s.run()
	if r.code != 0 || strings.TrimSpace(r.stdout) != "65534:65534" {
		t.Fatalf("code %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestNoZombies: a main command that orphans 50 children leaves none behind:
// every one is reparented to the supervisor (its subreaper) and reaped.
func TestNoZombies(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.spec.Main.Argv = helper("50")
	s.spec.Main.Env = []EnvEntry{helperEntry("orphans")}
	r := s.run()
	if r.code != 0 {
		t.Fatalf("code %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "50 reparented, all reaped") {
		t.Errorf("stdout %q", r.stdout)
	}
}

// TestLogs: the logs hold every launch's output, appended across restarts and
// truncated only when the sandbox starts.
func TestLogs(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	if err := os.MkdirAll(s.path("logs/d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"stdout.log", "stderr.log"} {
		if err := os.WriteFile(s.path("logs/d/"+f), []byte("stale line from an earlier sandbox\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.mainWaitsForStop()
	d := s.daemon("d", sh(fmt.Sprintf(`echo x >> %q; n=$(wc -l < %q); echo "out $n"; echo "err $n" >&2; exit 1`, s.path("n"), s.path("n"))))
	d.MaxRestarts = ptr(2)
	s.start()
	s.stopAfter(KindDaemonGaveUp)
	if got := s.read("logs/d/stdout.log"); got != "out 1\nout 2\nout 3\n" {
		t.Errorf("stdout.log %q", got)
	}
	if got := s.read("logs/d/stderr.log"); got != "err 1\nerr 2\nerr 3\n" {
		t.Errorf("stderr.log %q", got)
	}
}

// TestBadSpec: an invalid spec fails with 125 and a "cannot" message.
func TestBadSpec(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	a := s.daemon("a", sh("true"))
	b := s.daemon("b", sh("true"))
	a.After, b.After = []string{"b"}, []string{"a"}
	r := s.run()
	if r.code != 125 || !strings.Contains(r.stderr, "airlock: cannot order daemons: cycle in after: a -> b -> a") {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	for name, c := range map[string]struct {
		spec string
		code int
		msg  string
	}{
		"unknown-field": {`{"version":1,"main":{"argv":["true"]},"bogus":1}`, 125, `airlock: cannot decode spec: json: unknown field "bogus"`},
		"version":       {`{"version":2,"main":{"argv":["true"]}}`, 125, "airlock: cannot use spec version 2"},
		"signal":        {`{"version":1,"main":{"argv":["true"]},"daemons":[{"name":"x","command":["true"],"signal":"SIGBOGUS"}]}`, 125, `airlock: cannot use spec: daemons.x.signal: unknown signal "SIGBOGUS"`},
		"missing":       {"", 125, "airlock: cannot read spec"},
	} {
		path := s.path(name + ".json")
		if c.spec != "" {
			if err := os.WriteFile(path, []byte(c.spec), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out, err := exec.Command(airlockBin, "supervise", "--spec", path).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != c.code || !strings.Contains(string(out), c.msg) {
			t.Errorf("%s: %v, output:\n%s\nwant code %d and %q", name, err, out, c.code, c.msg)
		}
	}
	out, err := exec.Command(airlockBin, "supervise").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--spec is required") {
		t.Errorf("no --spec: %v, output:\n%s", err, out)
	}
}
