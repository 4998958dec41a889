package supervisor

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitLine is a shell function for a daemon's script: wait until the combined
// log holds the record $1, so that each write is read before the next (the
// order of two pipes' data is the order the supervisor read it).
func waitLine(log string) string {
	return fmt.Sprintf(`w() { until grep -qxF -- "$1" %q; do sleep 0.01; done; }; `, log)
}

// TestOutputLogInterleaves: a daemon writing to stdout and stderr in turn gets
// output.log with one record per line, in that order, tagged o or e; its
// stdout.log and stderr.log hold each stream as before. A line longer than
// MaxLogLine is there in records of MaxLogLine bytes, and a last line without
// a newline is a record once its stream ends. output.log is truncated at start.
func TestOutputLogInterleaves(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	if err := os.MkdirAll(s.path("logs/d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.path("logs/d/output.log"), []byte("o stale line from an earlier sandbox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	long := MaxLogLine + 10
	script := waitLine(s.path("logs/d/output.log")) +
		`echo out1; w "o out1"; echo err1 >&2; w "e err1"; echo out2; w "o out2"; echo err2 >&2; w "e err2"; ` +
		`echo; w "o "; ` +
		fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x; echo; w "o xxxxxxxxxx"; `, long) +
		`printf 'no newline' >&2`
	s.daemon("d", sh(script))
	s.mainWaitsForStop()
	s.start()
	s.waitEvent("the daemon's exit", func(e StatusEvent) bool { return e.Kind == KindDaemonExited })
	s.stop()
	if r := s.wait(); r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	x := strings.Repeat("x", MaxLogLine)
	want := "o out1\ne err1\no out2\ne err2\no \no " + x + "\no xxxxxxxxxx\ne no newline\n"
	if got := s.read("logs/d/output.log"); got != want {
		t.Errorf("output.log:\n%s\nwant:\n%s", abridge(got), abridge(want))
	}
	if got, want := s.read("logs/d/stdout.log"), "out1\nout2\n\n"+x+"xxxxxxxxxx\n"; got != want {
		t.Errorf("stdout.log %q, want %q", abridge(got), abridge(want))
	}
	if got, want := s.read("logs/d/stderr.log"), "err1\nerr2\nno newline"; got != want {
		t.Errorf("stderr.log %q, want %q", got, want)
	}
}

// abridge shortens runs of x for a message.
func abridge(s string) string {
	return strings.ReplaceAll(s, strings.Repeat("x", 1000), "[1000 x]")
}

// TestOutputAtShutdown: what a daemon writes as it shuts down is in its logs
// when the supervisor has ended (its end is reported after its pipes reached
// the files), and a process that left the daemon's group and holds its pipes
// does not hold the shutdown up for more than a moment.
func TestOutputAtShutdown(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.mainWaitsForStop()
	bye := s.daemon("bye", sh(`trap 'echo bye-out; echo bye-err >&2; exit 0' TERM; echo up; sleep 100 & wait $!`))
	bye.Ready = &Ready{Log: "^up$", Timeout: "20s"}
	pidFile := s.path("escaped.pid")
	esc := s.daemon("esc", sh(fmt.Sprintf(`echo up; setsid sh -c 'echo $$ > %q; echo escaped; exec sleep 60' & exec sleep 100`, pidFile)))
	// (up is written before the escaping child starts, so when escaped is
	// seen both lines are in the pipe: the stop cannot come between them.)
	esc.Ready = &Ready{Log: "^escaped$", Timeout: "20s"}
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	s.start()
	s.waitEvent("ready", func(e StatusEvent) bool { return e.Kind == KindSupervisorReady })
	stopped := time.Now()
	s.stop()
	r := s.wait()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if took := time.Since(stopped); took > 15*time.Second {
		t.Errorf("the shutdown took %v with a process outside the group holding a pipe", took)
	}
	// (The two streams' last lines come at once: in either order.)
	if got := s.read("logs/bye/output.log"); !strings.HasPrefix(got, "o up\n") || !strings.Contains(got, "\no bye-out\n") || !strings.Contains(got, "\ne bye-err\n") {
		t.Errorf("bye's output.log %q, want o up, then o bye-out and e bye-err", got)
	}
	if got := s.read("logs/bye/stdout.log"); got != "up\nbye-out\n" {
		t.Errorf("bye's stdout.log %q", got)
	}
	if got := s.read("logs/bye/stderr.log"); !strings.HasSuffix(got, "bye-err\n") {
		t.Errorf("bye's stderr.log %q", got)
	}
	if got := s.read("logs/esc/output.log"); !strings.Contains(got, "o escaped\n") || !strings.Contains(got, "o up\n") {
		t.Errorf("esc's output.log %q, want its two lines", got)
	}
}
