package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// lockedDir returns a folder of s that only root may enter (0700, owned by
// 0:0), in folders anyone may enter.
func lockedDir(s *sandbox) string {
	s.t.Helper()
	for _, d := range []string{filepath.Dir(s.dir), s.dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			s.t.Fatal(err)
		}
	}
	locked := s.path("locked")
	if err := os.Mkdir(locked, 0o700); err != nil {
		s.t.Fatal(err)
	}
	return locked
}

// TestWorkdirNotEnterable: a main command whose working directory its user
// cannot enter (a project dir of mode 0700 owned by root, sandbox.user
// nobody) fails with 125 and says so, naming the uid, the folder, its owner
// and mode and the fixes, not that /bin/sh is not executable; the command
// never runs. supervise exec (airlock exec) says the same.
func TestWorkdirNotEnterable(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to change user")
	}
	s := newSandbox(t)
	locked := lockedDir(s)
	s.spec.Main.User, s.spec.Main.Cwd = "65534:65534", locked
	s.spec.Main.Argv = sh("echo main-ran")
	r := s.run()
	want := "cannot use working directory " + locked + ": uid 65534 cannot enter " + locked + " (owned by 0:0, mode 0700)"
	if r.code != ExitAirlock || !strings.Contains(r.stderr, want) || strings.Contains(r.stdout, "main-ran") {
		t.Errorf("want exit 125 and %q, got %d\n--- stdout:\n%s--- stderr:\n%s", want, r.code, r.stdout, r.stderr)
	}
	for _, fix := range []string{"sandbox.user", "chmod o+x " + locked, `sandbox.project = "copy"`} {
		if !strings.Contains(r.stderr, fix) {
			t.Errorf("the error names no fix %q:\n%s", fix, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "not executable") {
		t.Errorf("the error blames the command:\n%s", r.stderr)
	}

	// airlock exec into a sandbox of that user.
	s = newSandbox(t)
	locked = lockedDir(s)
	s.spec.Main.Argv = nil
	s.spec.Main.User, s.spec.Main.Cwd = "65534:65534", "/"
	s.spec.ExecEnvFile = s.path("exec-env.json")
	s.start()
	s.waitEvent("supervisor.ready", func(e StatusEvent) bool { return e.Kind == KindSupervisorReady })
	cmd := exec.Command(airlockBin, "supervise", "exec", "--spec", s.path("spec.json"), "-w", locked, "--", "/bin/sh", "-c", "echo exec-ran")
	out, _ := cmd.CombinedOutput()
	want = "cannot use working directory " + locked + ": uid 65534 cannot enter " + locked + " (owned by 0:0, mode 0700)"
	if code := cmd.ProcessState.ExitCode(); code != ExitAirlock || !strings.Contains(string(out), want) || !strings.Contains(string(out), "chmod o+x "+locked) {
		t.Errorf("exec: want exit 125 and %q, got %d %s", want, code, out)
	}
	s.signal(syscall.SIGTERM)
	if r := s.wait(); r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
}
