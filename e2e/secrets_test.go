package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
)

// TestVaultSecretNeverLeaks: a secret stored in the vault reaches the main command
// (and airlock exec), the daemon and the service that declared it, and nothing else: not docker
// inspect of any container (the service's included) or exec, the store file, the daemon's log, the events,
// airlock config, any file airlock wrote on the host, or the Engine's disk: the
// containers' writable layers and volumes (design.md §5, §7).
func TestVaultSecretNeverLeaks(t *testing.T) {
	limit(t)
	const value = "vault-s3cret-Zq81x"
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[env]
TOKEN = "${VAULT_TOK}"
PLAIN = "literal-value"

[daemons.user]
command = ["sh", "-c", "echo \"$DTOK\" > /dev/shm/dtok; exec sleep 1000"]
env = { DTOK = "${VAULT_TOK}" }
ready = { cmd = ["test", "-s", "/dev/shm/dtok"], timeout = "10s" }

[services.svc]
image = "{{image}}"
command = ["sh", "-c", "mkdir -p /dev/shm/www && echo \"$SVCTOK\" > /dev/shm/www/t && exec httpd -f -p 80 -h /dev/shm/www"]
env = { SVCTOK = "${VAULT_TOK}", SVCPLAIN = "plain" }
`)
	e.Extra = append(e.Extra, "AIRLOCK_VAULT_PASSPHRASE=correct horse battery")

	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	set := e.Command(ctx, "secrets", "set", "VAULT_TOK", "--stdin")
	set.Stdin = strings.NewReader(value + "\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("secrets set: %v\n%s", err, out)
	}

	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	r := e.MustRun("exec", "--", "sh", "-c", "echo main=$TOKEN; echo daemon=$(cat /dev/shm/dtok); for i in 1 2 3 4 5 6 7 8 9 10; do wget -qO- http://svc/t && break; sleep 0.2; done | sed 's/^/service=/'")
	if !strings.Contains(r.Stdout, "main="+value) || !strings.Contains(r.Stdout, "daemon="+value) || !strings.Contains(r.Stdout, "service="+value) {
		t.Fatalf("the secret did not reach the processes that declared it: %s", r)
	}

	leak := func(where string, b []byte) {
		t.Helper()
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("the secret leaked into %s", where)
		}
	}
	// docker inspect of every container and exec of the sandbox.
	list, err := e.Cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", labelProject+"="+e.Project))})
	if err != nil || len(list) == 0 {
		t.Fatalf("cannot list the sandbox's containers: %v (%d)", err, len(list))
	}
	for _, c := range list {
		in, raw, err := e.Cli.ContainerInspectWithRaw(ctx, c.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		leak("docker inspect "+c.Names[0], raw)
		for _, ex := range in.ExecIDs {
			// The Engine's whole answer: the client's ExecInspect leaves out
			// the ProcessConfig, which holds the exec's arguments.
			leak("docker inspect of exec "+ex, execInspectRaw(t, e, ex))
		}
	}
	// airlock config in every form.
	for _, args := range [][]string{{"config"}, {"config", "--json"}, {"config", "--layers"}} {
		r := e.MustRun(args...)
		leak("airlock "+strings.Join(args, " "), []byte(r.Stdout+r.Stderr))
		contains(t, "airlock "+strings.Join(args, " "), r.Stdout, "********")
	}
	// The events.
	r = e.MustRun("events", id, "--json")
	leak("the events", []byte(r.Stdout))
	// The store file and the daemon's log.
	for _, p := range []string{filepath.Join(e.Data, "airlock", "ids.db"), filepath.Join(e.Data, "airlock", "daemon", "airlockd.log")} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		leak(p, b)
	}
	// Every file airlock wrote on the host (data and runtime dirs), and the
	// Engine's disk: each container's writable layer (the status stream and the
	// daemon logs live there) and the volumes it mounts. (The test's own
	// processes keep the value they print in /dev/shm, a tmpfs.)
	roots := []string{e.Data, e.Runtime}
	for _, c := range list {
		in, err := e.Cli.ContainerInspect(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		upper := in.GraphDriver.Data["UpperDir"]
		if upper == "" && in.State != nil && in.State.Pid > 0 {
			upper = overlayUpperDir(t, in.State.Pid)
		}
		if upper == "" {
			t.Errorf("cannot find the writable layer of %s on the Engine's disk (driver %s)", c.Names[0], in.GraphDriver.Name)
		}
		roots = append(roots, upper)
		for _, m := range in.Mounts {
			if m.Type == "volume" {
				roots = append(roots, m.Source)
			}
		}
	}
	files := 0
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				files++
				b, _ := os.ReadFile(p)
				leak(p, b)
			}
			return nil
		})
	}
	if files == 0 {
		t.Errorf("no file found to check under %v", roots)
	}
	e.MustRun("down")
}

// TestResumeAfterDaemonRestart: a stopped up sandbox whose [env] has substituted
// values starts again after the control daemon restarted (it never stored the
// values; airlock up resends them) and the main environment has them again.
func TestResumeAfterDaemonRestart(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[env]
TOKEN = "${HOST_TOKEN}"
`)
	e.Extra = append(e.Extra, "HOST_TOKEN=host-t0ken-value")
	e.MustRun("up", "-d")
	e.MustRun("stop")
	e.StopDaemon()
	e.MustRun("up", "-d")
	r := e.MustRun("exec", "--", "sh", "-c", "echo token=$TOKEN")
	if !strings.Contains(r.Stdout, "token=host-t0ken-value") {
		t.Fatalf("after a daemon restart the sandbox lost its substituted env: %s", r)
	}
	e.MustRun("down")
}

// overlayUpperDir is the upper directory of the overlay mounted as the root of
// process pid's mount namespace: a container's writable layer where the Engine
// does not name it (the containerd image store's snapshotter: Engine 29).
func overlayUpperDir(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Logf("cannot read the mounts of pid %d: %v", pid, err)
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
		pre, post, ok := strings.Cut(l, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || f[4] != "/" || len(g) < 3 || g[0] != "overlay" {
			continue
		}
		for _, o := range strings.Split(g[2], ",") {
			if v, found := strings.CutPrefix(o, "upperdir="); found {
				return v
			}
		}
	}
	return ""
}
