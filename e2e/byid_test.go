package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const byIDManifest = `
[sandbox]
image = "{{image}}"

[env]
FOO = "foo-value"

[daemons.ticker]
command = ["sh", "-c", "echo ticker-up; exec sleep 3600"]
timeout = 1
ready = { log = "ticker-up", timeout = "10s" }
`

// TestCommandsBySandboxID: an explicit sandbox ID needs no sandbox.toml: from a
// directory without one, exec (with -e), logs, events, stop and rm act on the
// sandbox named; in the project dir, exec ID -- CMD runs CMD, not the ID.
func TestCommandsBySandboxID(t *testing.T) {
	limit(t)
	e := newEnv(t, byIDManifest)
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	if id == "" {
		t.Fatal("up -d printed no ID")
	}
	outside := t.TempDir()
	if _, err := os.Stat(filepath.Join(outside, "sandbox.toml")); err == nil {
		t.Fatal("the outside dir has a sandbox.toml")
	}
	want := func(what string, r result, code int, stdout string) {
		t.Helper()
		if r.Code != code || (stdout != "" && !strings.Contains(r.Stdout, stdout)) {
			t.Errorf("%s: want exit %d and %q on stdout, got %s", what, code, stdout, r)
		}
	}

	r := e.Run("exec", id, "--", "sh", "-c", "echo hi")
	want("exec ID -- sh -c 'echo hi' in the project dir", r, 0, "hi\n")

	r = e.RunIn(outside, nil, "exec", id, "--", "sh", "-c", "echo hi")
	want("exec ID -- sh -c 'echo hi' outside the project", r, 0, "hi\n")
	if r.Stdout != "hi\n" {
		t.Errorf("exec ID -- sh -c 'echo hi': stdout %q, want %q", r.Stdout, "hi\n")
	}
	r = e.RunIn(outside, nil, "exec", "-e", "K=V", id, "--", "sh", "-c", "echo $K $FOO")
	want("exec -e K=V ID -- sh -c 'echo $K $FOO'", r, 0, "V foo-value\n")
	r = e.RunIn(outside, nil, "exec", id, "--", "sh", "-c", "exit 3")
	want("exec ID -- sh -c 'exit 3'", r, 3, "")
	r = e.RunIn(outside, nil, "exec", id, "--")
	want("exec ID -- (no command)", r, 2, "")

	r = e.RunIn(outside, nil, "logs", id)
	want("logs ID", r, 0, "ticker-up")
	r = e.RunIn(outside, nil, "logs", id, "ticker")
	want("logs ID ticker", r, 0, "ticker-up")
	r = e.RunIn(outside, nil, "events", id)
	want("events ID", r, 0, "sandbox.ready")

	r = e.RunIn(outside, nil, "stop", id)
	want("stop ID", r, 0, id)
	if ps := e.PS(); len(ps) != 1 || ps[0].ID != id || ps[0].State != "stopped" {
		t.Errorf("after stop ID, ps -a = %+v, want %s stopped", ps, id)
	}
	r = e.RunIn(outside, nil, "rm", id)
	want("rm ID", r, 0, id)
	if ps := e.PS(); len(ps) != 0 {
		t.Errorf("after rm ID, ps -a = %+v, want nothing", ps)
	}
	e.assertClean()
}

// TestUpConcurrent: `up -d` started several times at once makes one sandbox:
// the others wait for the first and report the same ID, exit 0, as a repeated
// `docker compose up -d` does. A later `up -d` does the same; an interactive
// `up` while it runs is refused, naming it.
func TestUpConcurrent(t *testing.T) {
	limit(t)
	e := newEnv(t, byIDManifest)
	// Without the project lock, the first round already made two or three
	// sandboxes in each try; more rounds make a miss unlikely.
	const n, rounds = 4, 3
	// The control daemon is started first: CLIs that start it at once race for
	// its lock, and a loser may give up before the winner answers (daemonctl.go,
	// not what this test is about).
	e.MustRun("daemon", "start")
	var id string
	for round := range rounds {
		if round > 0 {
			e.MustRun("down")
		}
		procs := make([]*proc, n)
		for i := range procs {
			procs[i] = e.Start("up", "-d")
		}
		id = ""
		for i, p := range procs {
			r := p.MustWait(t, cmdTimeout)
			got := strings.TrimSpace(r.Stdout)
			if r.Code != 0 || got == "" || strings.Contains(got, "\n") {
				t.Errorf("round %d: concurrent up -d #%d: want exit 0 and an ID, got %s", round, i, r)
				continue
			}
			if id == "" {
				id = got
			} else if got != id {
				t.Errorf("round %d: concurrent up -d #%d printed %s, another printed %s", round, i, got, id)
			}
		}
		ps := e.PS()
		if len(ps) != 1 || ps[0].ID != id || !isRunning(ps[0].State) {
			t.Fatalf("round %d: after %d concurrent up -d, ps -a = %+v, want one running sandbox %s", round, n, ps, id)
		}
	}

	r := e.MustRun("up", "-d")
	if got := strings.TrimSpace(r.Stdout); got != id {
		t.Errorf("up -d while %s runs printed %q, want its ID", id, got)
	}
	contains(t, "stderr of up -d while it runs", r.Stderr, id, "already running")

	r = e.Run("up")
	if r.Code == 0 {
		t.Errorf("up (with a shell) while %s runs: want a refusal, got %s", id, r)
	}
	contains(t, "stderr of up while it runs", r.Stderr, id, "airlock exec")

	// The lock files stay private to the user.
	locks, _ := filepath.Glob(filepath.Join(e.Runtime, "airlock", "up-*.lock"))
	if len(locks) != 1 {
		t.Errorf("project locks in the runtime dir: %v, want one", locks)
	}
	for _, l := range locks {
		st, err := os.Stat(l)
		if err != nil {
			t.Error(err)
		} else if st.Mode().Perm() != 0o600 {
			t.Errorf("lock %s: mode %v, want 0600", l, st.Mode().Perm())
		}
	}

	e.MustRun("down")
	if ps := e.PS(); len(ps) != 0 {
		t.Errorf("after down, ps -a = %+v", ps)
	}
	e.assertClean()
}
