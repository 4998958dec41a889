package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestLogs: -n N, --stdout, --stderr, and -f following a daemon across restarts
// until the sandbox stops.
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
	r := e.MustRun("logs", "--stdout", "-n", "2", id, "talker")
	if r.Stdout != "line-4\ntalker-ready\n" {
		t.Errorf("logs --stdout -n 2 = %q, want %q", r.Stdout, "line-4\ntalker-ready\n")
	}
	r = e.MustRun("logs", "--stderr", id, "talker")
	if r.Stdout != "" || r.Stderr != "err-line\n" {
		t.Errorf("logs --stderr: stdout %q, stderr %q; want err-line on stderr", r.Stdout, r.Stderr)
	}
	r = e.MustRun("logs", "--stdout", id, "talker")
	if r.Stdout != "line-1\nline-2\nline-3\nline-4\ntalker-ready\n" || r.Stderr != "" {
		t.Errorf("logs --stdout = %q, stderr %q", r.Stdout, r.Stderr)
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

// bothManifest is a daemon that writes to stdout and stderr in turn, each line
// once the one before is in its combined log (two pipes' data are in the order
// the supervisor read them), and is ready once its last line is there.
const bothManifest = `
[sandbox]
image = "{{image}}"
network = "none"

[daemons.mixed]
command = ["sh", "-c", '''
L=/airlock/state/daemons/mixed/output.log
w() { until grep -qxF -- "$1" $L; do sleep 0.01; done; }
echo out-1; w "o out-1"
echo err-1 >&2; w "e err-1"
echo out-2; w "o out-2"
echo err-2 >&2; w "e err-2"
echo mixed-ready; w "o mixed-ready"
touch /tmp/mixed-ready
exec sleep 300''']
ready = { cmd = ["test", "-e", "/tmp/mixed-ready"], timeout = "60s" }
timeout = 1
`

// TestLogsBothStreams (issue 24): postgres, mariadb and memcached log to stderr,
// so logs shows both streams, in the order they were written: stdout lines on
// stdout, stderr lines on stderr, as docker logs; --stdout and --stderr show one;
// --tail N the last N lines shown. The same of a running sandbox (read in it) and
// a stopped one (read through the archive API).
func TestLogsBothStreams(t *testing.T) {
	limit(t)
	e := newEnv(t, bothManifest)
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			args           []string
			stdout, stderr string
		}{
			{[]string{"logs", id, "mixed"}, "out-1\nout-2\nmixed-ready\n", "err-1\nerr-2\n"},
			{[]string{"logs", "--stdout", id, "mixed"}, "out-1\nout-2\nmixed-ready\n", ""},
			{[]string{"logs", "--stderr", id, "mixed"}, "", "err-1\nerr-2\n"},
			{[]string{"logs", "--tail", "1", id, "mixed"}, "mixed-ready\n", ""},
			{[]string{"logs", "-n", "2", id, "mixed"}, "mixed-ready\n", "err-2\n"},
			{[]string{"logs", "--stderr", "-n", "1", id, "mixed"}, "", "err-2\n"},
			// The sandbox's only daemon, without a prefix.
			{[]string{"logs", id}, "out-1\nout-2\nmixed-ready\n", "err-1\nerr-2\n"},
		} {
			if r := e.Run(c.args...); r.Code != 0 || r.Stdout != c.stdout || r.Stderr != c.stderr {
				t.Errorf("%s: airlock %s: %s\nwant stdout %q, stderr %q", when, strings.Join(c.args, " "), r, c.stdout, c.stderr)
			}
		}
		// Both on one pipe (2>&1): in the order written.
		ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
		defer cancel()
		var both bytes.Buffer
		cmd := e.Command(ctx, "logs", id, "mixed")
		cmd.Stdout, cmd.Stderr = &both, &both
		if err := cmd.Run(); err != nil || both.String() != "out-1\nerr-1\nout-2\nerr-2\nmixed-ready\n" {
			t.Errorf("%s: airlock logs %s mixed 2>&1: %v, %q; want the lines in the order written", when, id, err, both.String())
		}
	}
	check("running")
	if r := e.Run("logs", "--stdout", "--stderr", id, "mixed"); r.Code != 2 || r.Stdout != "" || !strings.Contains(r.Stderr, "--stdout or --stderr") {
		t.Errorf("logs --stdout --stderr: %s\nwant a usage error (exit 2)", r)
	}
	e.MustRun("stop", id)
	check("stopped")
	e.MustRun("rm", id)
	e.assertClean()
}
