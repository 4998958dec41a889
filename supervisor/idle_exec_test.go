package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// An up sandbox has no main command: the supervisor runs its daemons, reports
// supervisor.ready, and idles until SIGTERM, then shuts the daemons down and exits 0.
func TestIdleMainRunsUntilStopped(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.spec.Main.Argv = nil
	s.daemon("d", sh("trap 'exit 0' TERM; while :; do sleep 0.05; done"))
	s.start()
	s.waitEvent("supervisor.ready", func(e StatusEvent) bool { return e.Kind == KindSupervisorReady })
	s.signal(syscall.SIGTERM)
	r := s.wait()
	if r.code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "✔ daemon d: shut down") {
		t.Fatalf("no shutdown line:\n%s", r.stderr)
	}
}

// supervise exec runs a command with the main command's environment, which the
// supervisor writes to exec_env_file (substituted values included), with -e over
// it, in the main command's cwd unless -w, and maps 127/126.
func TestSuperviseExec(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.spec.Main.Argv = nil
	s.spec.ExecEnvFile = s.path("exec-env.json")
	s.spec.Main.Cwd = s.dir
	s.spec.Main.Env = []EnvEntry{literal("FOO", "literal"), {Name: "TOKEN", Secret: "env.TOKEN"}}
	s.secrets = map[string]string{"env.TOKEN": "s3cret-value"}
	s.start()
	s.waitEvent("supervisor.ready", func(e StatusEvent) bool { return e.Kind == KindSupervisorReady })
	if st, err := os.Stat(s.spec.ExecEnvFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("exec env file: %v %v", st, err)
	}
	run := func(args ...string) (string, int) {
		cmd := exec.Command(airlockBin, append([]string{"supervise", "exec", "--spec", s.path("spec.json")}, args...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run("--", "/bin/sh", "-c", "echo $FOO $TOKEN $(pwd); exit 3")
	if code != 3 || strings.TrimSpace(out) != "literal s3cret-value "+s.dir {
		t.Fatalf("exec: %d %q", code, out)
	}
	out, _ = run("-e", "FOO=over", "-w", "/", "--", "/bin/sh", "-c", "echo $FOO $(pwd)")
	if strings.TrimSpace(out) != "over /" {
		t.Fatalf("exec -e -w: %q", out)
	}
	if out, code = run("--", "no-such-command-xyz"); code != 127 || !strings.Contains(out, "no-such-command-xyz") {
		t.Fatalf("not found: %d %q", code, out)
	}
	if _, code = run("--", filepath.Join(s.dir, "spec.json")); code != 126 {
		t.Fatalf("not executable: %d", code)
	}
	s.signal(syscall.SIGTERM)
	if r := s.wait(); r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	if _, err := os.Stat(s.spec.ExecEnvFile); !os.IsNotExist(err) {
		t.Fatalf("the exec env file outlived the supervisor: %v", err)
	}
}

// TestSuperviseExecMainUser: a root supervisor whose main command has a user
// (a sandbox whose daemons need root beside a non-root sandbox.user) runs
// `supervise exec` (airlock exec, the shell of up) as that user, with its
// groups and the main command's hardening, from the container's root user: the
// values and the environment are taken as root, then it becomes the user.
func TestSuperviseExecMainUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to change user")
	}
	s := newSandbox(t)
	s.spec.Main.Argv = nil
	s.spec.Main.User = "65534:65534"
	s.spec.Main.Cwd = "/"
	s.spec.ExecEnvFile = s.path("exec-env.json")
	s.spec.Main.Env = []EnvEntry{literal("FOO", "literal")}
	s.start()
	s.waitEvent("supervisor.ready", func(e StatusEvent) bool { return e.Kind == KindSupervisorReady })
	values := s.path("values.json")
	if err := StashExecEnv(values, strings.NewReader(`["BAR=from-values"]`)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(airlockBin, "supervise", "exec", "--spec", s.path("spec.json"), "--values", values, "--",
		"/bin/sh", "-c", `echo "$(id -u) $(id -g) $(id -G) $FOO $BAR $(pwd)"; grep NoNewPrivs /proc/self/status`)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("supervise exec: %v\n%s", err, out)
	}
	if want := "65534 65534 65534 literal from-values /\nNoNewPrivs:\t1\n"; string(out) != want {
		t.Errorf("supervise exec printed\n%q, want\n%q", out, want)
	}
	s.signal(syscall.SIGTERM)
	if r := s.wait(); r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
}
