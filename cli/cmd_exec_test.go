package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/client"
)

// execRecord returns the exec request the daemon received for sandbox id
// (exec runs through the daemon: an attached exec) and the exit codes of the
// exec.finished events it recorded.
func execRecord(t *testing.T, f *fakeDaemon, id string) (client.ExecRequest, []int) {
	t.Helper()
	starts := f.requests("POST /v1/sandboxes/" + id + "/execs")
	if len(starts) != 1 {
		t.Fatalf("want one exec for %s, the daemon received:\n%s", id, f.requestList())
	}
	var req client.ExecRequest
	starts[0].decode(t, &req)
	var codes []int
	for _, ev := range f.history(id) {
		if ev.Kind == "exec.finished" && ev.ExitCode != nil {
			codes = append(codes, *ev.ExitCode)
		}
	}
	return req, codes
}

// exec runs the command through the daemon (an attached exec) with the
// CLI's streams: stdin forwarded, stdout and stderr apart; the daemon runs and
// records it (started, finished with the exit code); the CLI opens no Engine.
func TestExecStreamsAndRecord(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "s1"})
	f.engine.onExec(func(c *fakeExecCall) int {
		in, _ := io.ReadAll(c.Stdin)
		fmt.Fprintf(c.Stdout, "got %q\n", in)
		fmt.Fprintf(c.Stderr, "a warning\n")
		return 0
	})
	r := f.runWithStdin("line 1\nline 2\n", "exec", "s1", "--", "cat", "-n")
	if r.code != 0 || r.stdout != "got \"line 1\\nline 2\\n\"\n" || r.stderr != "a warning\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	req, fin := execRecord(t, f, "s1")
	if !slices.Equal(req.Cmd, []string{"cat", "-n"}) || req.Interactive || req.TTY || req.Env != nil || req.Workdir != "" {
		t.Errorf("exec asked as %+v", req)
	}
	if !slices.Equal(fin, []int{0}) {
		t.Errorf("exec finished with %v, want exit code 0", fin)
	}
	f.assertRequests("GET /v1/sandboxes/s1", "POST /v1/sandboxes/s1/execs")
	f.engine.mu.Lock()
	n := len(f.engine.reqs)
	f.engine.mu.Unlock()
	if n != 0 {
		t.Errorf("the CLI made %d Engine requests; exec goes through the daemon only", n)
	}
}

// CMD's exit code is airlock's, and is what the daemon records.
func TestExecExitCode(t *testing.T) {
	t.Parallel()
	for _, code := range []int{1, 3, 127, 130} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			f := newFakeDaemon(t)
			f.add(client.Sandbox{ID: "s1"})
			f.engine.onExec(func(c *fakeExecCall) int {
				fmt.Fprintln(c.Stderr, "it failed")
				return code
			})
			r := f.run("exec", "s1", "--", "false")
			if r.code != code || r.stdout != "" || r.stderr != "it failed\n" {
				t.Errorf("exit %d (want %d), stdout %q, stderr %q", r.code, code, r.stdout, r.stderr)
			}
			if _, fin := execRecord(t, f, "s1"); !slices.Equal(fin, []int{code}) {
				t.Errorf("exec finished with %v, want %d", fin, code)
			}
		})
	}
}

// -e K=V is literal, -e K takes K from airlock's environment (left out when
// unset), -w sets the working directory; all go to the daemon, which runs the
// exec (that the values stay out of the Engine's exec configuration and of
// every record is e2e.TestExecEnvStaysPrivate's, through the real daemon).
func TestExecEnvAndWorkdir(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.env["EXEC_FROM_HOST"] = "host value"
	f.add(client.Sandbox{ID: "s1"})
	var call fakeExecCall
	f.engine.onExec(func(c *fakeExecCall) int { call = *c; return 0 })
	r := f.run("exec", "-e", "A=1", "--env", "EXEC_FROM_HOST", "-e", "EXEC_UNSET", "-e", "B=x=y", "-w", "/src/sub", "s1", "--", "env")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	wantEnv := []string{"A=1", "EXEC_FROM_HOST=host value", "B=x=y"}
	if !slices.Equal(call.Env, wantEnv) || call.Workdir != "/src/sub" || !slices.Equal(call.Cmd, []string{"env"}) {
		t.Errorf("the supervisor got env %q, workdir %q, cmd %q; want %q, /src/sub, [env]", call.Env, call.Workdir, call.Cmd, wantEnv)
	}
	req, _ := execRecord(t, f, "s1")
	if !slices.Equal(req.Env, wantEnv) || req.Workdir != "/src/sub" {
		t.Errorf("exec asked as %+v", req)
	}
}

// SANDBOX comes before --; without it the command runs in this project's
// sandbox, and flags after the first argument are the command's own.
func TestExecArguments(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	file, dir := projectFile(t)
	f.add(client.Sandbox{ID: "mine", Project: dir})
	f.add(client.Sandbox{ID: "other"})
	var ran []string
	f.engine.onExec(func(c *fakeExecCall) int {
		ran = append(ran, strings.Join(c.Cmd, " "))
		return 0
	})
	for _, c := range []struct {
		args    []string
		sandbox string
		cmd     string
	}{
		{[]string{"--file", file, "exec", "--", "ls", "-la"}, "mine", "ls -la"},
		{[]string{"--file", file, "exec", "ls", "-la"}, "mine", "ls -la"},
		{[]string{"--file", file, "exec", "-e", "A=1", "ls", "-e", "B=2"}, "mine", "ls -e B=2"},
		{[]string{"exec", "other", "--", "sh", "-c", "echo hi"}, "other", "sh -c echo hi"},
		// A second -- is the command's (only a -- right after SANDBOX is exec's).
		{[]string{"--file", file, "exec", "--", "other", "--", "id"}, "mine", "other -- id"},
	} {
		ran = nil
		before := len(f.requests("POST /v1/sandboxes/" + c.sandbox + "/execs"))
		r := f.run(c.args...)
		if r.code != 0 || len(ran) != 1 || ran[0] != c.cmd {
			t.Errorf("%q: exit %d, stderr %q, ran %q; want %q", c.args, r.code, r.stderr, ran, c.cmd)
		}
		if after := len(f.requests("POST /v1/sandboxes/" + c.sandbox + "/execs")); after != before+1 {
			t.Errorf("%q did not run in %s:\n%s", c.args, c.sandbox, f.requestList())
		}
	}
}

func TestExecUsageErrors(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "s1"})
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"exec"}, "airlock: requires at least 1 arg(s), only received 0\n"},
		{[]string{"exec", "s1", "--"}, "airlock: give the command after --\n"},
		// Two words before --: not a sandbox and a command, but a mistake.
		{[]string{"exec", "s1", "s2", "--", "true"}, "airlock: give at most one SANDBOX before --\n"},
		{[]string{"exec", "--"}, "airlock: requires at least 1 arg(s), only received 0\n"},
		{[]string{"exec", "-e", "=x", "s1", "--", "true"}, `airlock: invalid -e "=x": use NAME=VALUE or NAME` + "\n"},
		{[]string{"exec", "-w"}, "airlock: flag needs an argument: 'w' in -w\nSee 'airlock exec --help'.\n"},
		{[]string{"exec", "--bogus", "s1", "--", "true"}, "airlock: unknown flag: --bogus\nSee 'airlock exec --help'.\n"},
		// -t needs a terminal, which a test's streams are not.
		{[]string{"exec", "-t", "s1", "--", "sh"}, "airlock: -t needs stdin and stdout to be terminals\n"},
	} {
		r := f.run(c.args...)
		if r.code != ExitUsage || r.stderr != c.stderr || r.stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, %q", c.args, r.code, r.stdout, r.stderr, c.stderr)
		}
	}
	if n := len(f.requests("POST /v1/sandboxes/s1/execs")); n != 0 {
		t.Errorf("a usage error recorded %d execs", n)
	}
}

func TestExecErrors(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	file, dir := projectFile(t)
	f.add(client.Sandbox{ID: "stopped", State: client.StateStopped})
	f.add(client.Sandbox{ID: "pending", State: client.StatePending})
	f.add(client.Sandbox{ID: "refused"})
	f.fail("POST", "/v1/sandboxes/refused/execs", &client.Error{Reason: client.ReasonInvalidState, Message: "sandbox refused is deleting, not ready"})
	f.assertFailures([]cliFailure{
		{[]string{"exec", "nosuch", "--", "true"}, ExitFailure, "airlock: sandbox nosuch not found\n"},
		{[]string{"exec", "stopped", "--", "true"}, ExitFailure, "airlock: sandbox stopped is stopped (start it with `airlock up -d`)\n"},
		{[]string{"exec", "pending", "--", "true"}, ExitFailure, "airlock: sandbox pending is pending (start it with `airlock up -d`)\n"},
		{[]string{"exec", "refused", "--", "true"}, ExitFailure, "airlock: sandbox refused is deleting, not ready\n"},
		{[]string{"--file", file, "exec", "--", "true"}, ExitFailure, "airlock: no sandbox for the project " + dir + " (start one with `airlock up`)\n"},
	})
}

// The Engine finds the container stopped: the daemon says so, 125, and its
// record of the exec is finished with 125.
func TestExecContainerNotRunning(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "s1"})
	f.engine.stopContainer("c-s1")
	r := f.run("exec", "s1", "--", "true")
	if r.code != ExitAirlock || r.stderr != "airlock: sandbox s1 is not running (start it with `airlock up -d`)\n" {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, fin := execRecord(t, f, "s1"); !slices.Equal(fin, []int{ExitAirlock}) {
		t.Errorf("exec finished with %v, want 125", fin)
	}
}
