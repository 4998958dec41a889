package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestOneshotSetupStep: a one-shot daemon (oneshot = true) as a root setup step
// of a root sandbox: it adds an /etc/hosts line and prepares a folder only the
// nobody user may write, runs to completion before the daemon that names it in
// after (which runs as nobody and writes there) and before the main command,
// which sees both. Its output is in its log (airlock logs) and its events say
// it completed.
//
// A root step beside a non-root main command: TestRootStepBesideNonRootMain.
func TestOneshotSetupStep(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"
network = "none"

[daemons.setup]
oneshot = true
user = "root"
command = ["sh", "-c", "echo '10.9.8.7 oneshot-host' >> /etc/hosts && mkdir -p /data && chown nobody:nobody /data && chmod 700 /data && echo \"setup done as $(id -u)\""]

[daemons.web]
user = "nobody"
after = ["setup"]
timeout = 1
command = ["sh", "-c", "echo \"written by $(id -u)\" > /data/web.txt; exec sleep 300"]
ready = { cmd = ["test", "-s", "/data/web.txt"], timeout = "20s" }
`)
	id := uniq("oneshot")
	r := e.Run("run", "--keep", "--id", id, "--", "sh", "-c", "grep oneshot-host /etc/hosts; cat /data/web.txt; echo \"main $(id -u)\"")
	if want := "10.9.8.7 oneshot-host\nwritten by 65534\nmain 0\n"; r.Code != 0 || r.Stdout != want {
		t.Errorf("want exit 0 and\n%s\ngot %s", want, r)
	}
	if logs := e.MustRun("logs", id, "setup"); logs.Stdout != "setup done as 0\n" {
		t.Errorf("logs %s setup: %q", id, logs.Stdout)
	}
	ev := e.MustRun("events", id, "--json")
	var completed, exited int
	for _, line := range strings.Split(strings.TrimSpace(ev.Stdout), "\n") {
		var v struct {
			Kind     string `json:"kind"`
			Daemon   string `json:"daemon"`
			ExitCode *int   `json:"exit_code"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("events --json: %v in %q", err, line)
		}
		if v.Daemon != "setup" {
			continue
		}
		switch v.Kind {
		case "daemon.completed":
			if v.ExitCode != nil && *v.ExitCode == 0 {
				completed++
			}
		case "daemon.exited", "daemon.restarting":
			exited++
		}
	}
	if completed != 1 || exited != 0 {
		t.Errorf("setup: %d daemon.completed events with exit code 0 (want 1), %d exited or restarting (want 0):\n%s", completed, exited, ev.Stdout)
	}
	e.MustRun("rm", id)
	e.assertClean()
}

// The case one-shots are for, a schema loaded after the postgres preset's
// daemon is ready and used by the main command at once, is checked in the
// sandbox of TestPresetPostgresDebian.

// TestRootStepBesideNonRootMain: in a sandbox whose user is not root
// (65534:65534), a one-shot step and a daemon that name user = "root" run as
// root (PID 1 is root for them), while the main command, `airlock exec` and
// a daemon without a user run as the sandbox user: the step writes a file
// only root may write and hands a folder to 65534; the main command writes
// into the folder, cannot write the file, and so cannot an exec.
func TestRootStepBesideNonRootMain(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"
network = "none"
user = "65534:65534"

[daemons.setup]
oneshot = true
user = "root"
command = ["sh", "-c", "mkdir -p /data /owned && echo 'root only' > /data/root-only && chmod 644 /data/root-only && chown 65534:65534 /owned && echo \"setup as $(id -u)\""]

[daemons.rootd]
user = "root"
after = ["setup"]
command = ["sh", "-c", "id -u > /tmp/rootd.new; mv /tmp/rootd.new /tmp/rootd.id; exec sleep 300"]
ready = { cmd = ["test", "-s", "/tmp/rootd.id"], timeout = "20s" }

[daemons.plain]
command = ["sh", "-c", "id -u > /tmp/plain.new; mv /tmp/plain.new /tmp/plain.id; exec sleep 300"]
ready = { cmd = ["test", "-s", "/tmp/plain.id"], timeout = "20s" }
`)
	script := `id -u
echo "rootd $(cat /tmp/rootd.id) plain $(cat /tmp/plain.id)"
touch /owned/by-main && echo "owned $(stat -c %u /owned/by-main)"
if echo x >> /data/root-only; then echo "wrote the root file"; else echo "root file refused"; fi
cat /data/root-only
grep '^NoNewPrivs:' /proc/self/status`
	r := e.Run("run", "--wait", "--", "sh", "-c", script)
	want := "65534\nrootd 0 plain 65534\nowned 65534\nroot file refused\nroot only\nNoNewPrivs:\t1\n"
	if r.Code != 0 || r.Stdout != want {
		t.Errorf("want exit 0 and\n%s\ngot %s", want, r)
	}

	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	if r := e.Run("exec", "--", "id", "-u"); r.Code != 0 || r.Stdout != "65534\n" {
		t.Errorf("exec -- id -u: want exit 0 and 65534, got %s", r)
	}
	if r := e.Run("exec", "--", "sh", "-c", "echo x >> /data/root-only"); r.Code == 0 {
		t.Errorf("exec wrote the root-only file: %s", r)
	}
	if logs := e.MustRun("logs", id, "setup"); logs.Stdout != "setup as 0\n" {
		t.Errorf("logs %s setup: %q", id, logs.Stdout)
	}
	e.MustRun("down")
	e.assertClean()
}
