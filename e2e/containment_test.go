//go:build projects

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/supervisor"
)

const containmentManifest = `
[sandbox]
image = "{{image}}"

[env]
TOKEN = "${CONTAIN_TOKEN}"

[mounts.data]
source = "{{project}}/../declared"
target = "/declared"
missing = "create-dir"

[daemons.web]
command = ["httpd", "-f", "-p", "8080"]
ready = { tcp = "127.0.0.1:8080", timeout = "10s" }

[services.svc]
image = "{{image}}"
command = ["sh", "-c", "exec sleep 1000"]
env = { SVCTOK = "${CONTAIN_TOKEN}" }
`

// TestContainment: no sandbox or service container has a bind mount of airlock's
// own state (only the project dir and the declared mounts), and a process in the
// sandbox that plants symlinks where airlock used to write its state changes
// nothing on the host across a stop and a start (design.md §7, the channel issue).
func TestContainment(t *testing.T) {
	limit(t)
	e := newEnv(t, containmentManifest)
	e.Extra = append(e.Extra, "CONTAIN_TOKEN=contain-t0ken")
	// A host file the attack aims at, outside the project.
	victim := filepath.Join(filepath.Dir(e.Project), "victim")
	if err := os.WriteFile(victim, []byte("untouched\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(victim)
	declared := filepath.Clean(filepath.Join(e.Project, "..", "declared"))

	e.MustRun("up", "-d")
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	assertOnlyDeclaredMounts(t, e, ctx, declared)

	// The symlink trick of the issue, and more: every path airlock ever used for
	// its state points at the host file, and the sandbox record is edited.
	e.MustRun("exec", "--", "sh", "-c", strings.Join([]string{
		"mkdir -p /airlock/secret",
		"ln -sf " + victim + " /airlock/secret/secrets.json.tmp",
		"ln -sf " + victim + " /airlock/secret/secrets.json",
		"echo '{\"uid\":4242,\"gid\":4242}' > /airlock/sandbox.json 2>/dev/null || true",
		"rm -f " + supervisor.StatusFile + " && ln -s " + victim + " " + supervisor.StatusFile,
		"rm -rf " + supervisor.DaemonLogRoot + "/web && ln -s " + filepath.Dir(victim) + " " + supervisor.DaemonLogRoot + "/web",
	}, " && "))
	e.MustRun("stop")
	e.MustRun("up", "-d")
	r := e.MustRun("exec", "--", "sh", "-c", "echo token=$TOKEN")
	contains(t, "exec after the restart", r.Stdout, "token=contain-t0ken")
	assertOnlyDeclaredMounts(t, e, ctx, declared)

	after, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(victim)
	if string(b) != "untouched\n" || after.Mode() != before.Mode() || after.Sys().(*syscall.Stat_t).Uid != before.Sys().(*syscall.Stat_t).Uid {
		t.Errorf("the host file changed: %q, mode %v, owner %d", b, after.Mode(), after.Sys().(*syscall.Stat_t).Uid)
	}
	e.MustRun("down")
	e.assertClean()
}

// assertOnlyDeclaredMounts fails when a container of the project mounts anything
// from the host but the project dir and the declared mount source.
func assertOnlyDeclaredMounts(t *testing.T, e *env, ctx context.Context, declared string) {
	t.Helper()
	list, err := e.Cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", labelProject+"="+e.Project))})
	if err != nil || len(list) < 2 {
		t.Fatalf("want the primary and the service container, got %d (%v)", len(list), err)
	}
	for _, c := range list {
		in, err := e.Cli.ContainerInspect(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		allowed := map[string]bool{} // "source:destination" of the mounts checked
		for _, m := range in.Mounts {
			switch {
			case m.Type == "bind" && (m.Source == e.Project || m.Source == declared):
				allowed[m.Source+":"+m.Destination] = true
			case m.Type == "volume" && m.Destination == backend.BinMount && m.RW == false:
				allowed[m.Name+":"+m.Destination] = true
			default:
				t.Errorf("container %s mounts %s %s at %s: only the project dir, the declared mounts and the supervisor volume may be mounted", c.Names[0], m.Type, m.Source, m.Destination)
			}
		}
		// airlock makes no Binds (only Mounts); Podman's Docker-compatible API
		// lists every mount among them too, as "source:destination:options".
		for _, b := range in.HostConfig.Binds {
			if f := strings.SplitN(b, ":", 3); len(f) < 2 || !allowed[f[0]+":"+f[1]] {
				t.Errorf("container %s has a bind %s", c.Names[0], b)
			}
		}
	}
}

// TestStatusStreamAbuse: a sandbox that writes a line too long for the daemon
// into its status stream is failed and killed; one that replaces the stream with
// a FIFO is ignored; the daemon keeps serving other sandboxes either way.
func TestStatusStreamAbuse(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"
`)
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)

	// A FIFO in place of the stream, then a stop: the daemon must not block on it.
	e.MustRun("exec", "--", "sh", "-c", "rm -f "+supervisor.StatusFile+" && mkfifo "+supervisor.StatusFile)
	done := make(chan result, 1)
	go func() { done <- e.Run("stop") }()
	select {
	case r := <-done:
		if r.Code != 0 {
			t.Fatalf("stop with a FIFO for a status stream: %s", r)
		}
	case <-time.After(time.Minute):
		t.Fatal("stop hangs on a sandbox whose status stream is a FIFO")
	}
	e.MustRun("ps", "-a")
	// Started again, the stream is a fresh file and the sandbox gets ready.
	e.MustRun("up", "-d")

	// A line longer than the daemon reads: the sandbox fails and is killed.
	abuse := func(script string) {
		t.Helper()
		// The sandbox may be killed for it before the exec ends (137).
		if r := e.Run("exec", "--", "sh", "-c", script); r.Code != 0 && r.Code != 137 {
			t.Fatalf("exec: %s", r)
		}
	}
	abuse("head -c 200000 /dev/zero | tr '\\0' 'a' >> " + supervisor.StatusFile)
	eventually(t, 30*time.Second, "the sandbox to fail", func() bool {
		ps := e.PS()
		return len(ps) == 1 && ps[0].State == "failed"
	})
	r := e.MustRun("events", id)
	contains(t, "events", r.Stdout, "status stream", "longer than")

	// A flood of well-formed lines: the sandbox fails, the store is not flooded.
	e.MustRun("up", "-d")
	abuse(`i=0; while [ $i -lt 5000 ]; do echo '{"time":"2026-01-01T00:00:00Z","kind":"daemon.started","daemon":"x","pid":1}'; i=$((i+1)); done >> ` + supervisor.StatusFile)
	eventually(t, 30*time.Second, "the flooding sandbox to fail", func() bool {
		ps := e.PS()
		return len(ps) == 1 && ps[0].State == "failed"
	})
	r = e.MustRun("events", id)
	contains(t, "events", r.Stdout, "lines a second")
	// The budget is a burst of 2000 lines and 100 a second after it.
	if n := strings.Count(r.Stdout, "daemon.started"); n >= 4000 {
		t.Errorf("%d of the flood's 5000 lines became events", n)
	}

	// The daemon still serves: a run elsewhere works.
	other := newEnv(t, plainManifest)
	other.Data, other.Runtime, other.Config = e.Data, e.Runtime, e.Config
	if r := other.Run("run", "--", "true"); r.Code != 0 {
		t.Fatalf("a run after the abuse: %s", r)
	}
	e.MustRun("rm", "-f", id)
	e.assertClean()
}
