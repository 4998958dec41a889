package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestLogs: -n N, --stderr, and -f following a daemon across restarts until the
// sandbox stops.
func TestLogs(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[daemons.talker]
command = ["sh", "-c", "for i in 1 2 3 4; do echo line-$i; done; echo err-line >&2; echo talker-ready; exec sleep 300"]
timeout = 1
ready = { log = "talker-ready", timeout = "10s" }
`)
	id := uniq("logs")
	e.MustRun("run", "--keep", "--id", id, "--", "true")
	r := e.MustRun("logs", "-n", "2", id, "talker")
	if r.Stdout != "line-4\ntalker-ready\n" {
		t.Errorf("logs -n 2 = %q, want %q", r.Stdout, "line-4\ntalker-ready\n")
	}
	r = e.MustRun("logs", "--stderr", id, "talker")
	if r.Stdout != "err-line\n" {
		t.Errorf("logs --stderr = %q, want %q", r.Stdout, "err-line\n")
	}
	r = e.MustRun("logs", id, "talker")
	if r.Stdout != "line-1\nline-2\nline-3\nline-4\ntalker-ready\n" {
		t.Errorf("logs = %q", r.Stdout)
	}
	r = e.Run("logs", id, "nosuchdaemon")
	if r.Code == 0 {
		t.Errorf("logs of an unknown daemon: want a failure, got %s", r)
	}
	e.MustRun("rm", id)
	e.assertClean()
}

func TestLogsFollowAcrossRestarts(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[daemons.flappy]
command = ["sh", "-c", "echo run-$$; sleep 1; exit 1"]
restart = "on-failure"
timeout = 1
`)
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	p := e.Start("logs", "-f", id, "flappy")
	runs := func() []string {
		var out []string
		for _, l := range strings.Split(p.Stdout.String(), "\n") {
			if strings.HasPrefix(l, "run-") {
				out = append(out, l)
			}
		}
		return out
	}
	eventually(t, 30*time.Second, "two runs of the daemon in logs -f", func() bool { return len(runs()) >= 2 })
	if r := runs(); r[0] == r[1] {
		t.Errorf("logs -f shows the same run twice: %q", r)
	}
	select {
	case <-p.Done:
		t.Fatalf("logs -f ended while the sandbox runs: %s", p.Stderr)
	default:
	}
	e.MustRun("stop")
	r := p.MustWait(t, 30*time.Second)
	if r.Code != 0 {
		t.Errorf("logs -f after the sandbox stopped: %s", r)
	}
	e.MustRun("rm", id)
	e.assertClean()
}
