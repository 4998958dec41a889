package e2e

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/supervisor"
)

// rssBound is the most memory `airlock logs` may take, whatever a daemon wrote.
const rssBound = 200 << 20

// TestLogsOfAHugeLineAreBounded: a daemon turns its stdout log and its combined
// log (a record's tag, then the line) into sparse 3 GiB files without a newline
// (then a marker). `airlock logs -n 5` and plain `logs`, of stdout (--stdout)
// and of both, print the first 64 KiB of that one line and how much was left
// out: the sandbox reads the log (backwards from the end for -n) and cuts the
// line, so neither the CLI nor the Engine API carries more. Each stays within rssBound (its peak RSS, from
// the kernel), and the control daemon, which logs never pass through, does not
// grow (issue 21, 7). A stopped sandbox's log, read through the archive API, is
// bounded the same way (cli.TestLogsTailRunningAndStopped, cli.TestLongLinesCut).
func TestLogsOfAHugeLineAreBounded(t *testing.T) {
	limit(t)
	const size = 3 << 30
	e := newEnv(t, `
[sandbox]
image = "{{image}}"
network = "none"

[daemons.d1]
command = ["sh", "-c", "D=/airlock/state/daemons/d1; for L in $D/stdout.log $D/output.log; do dd if=/dev/zero of=$L bs=1 count=0 seek=`+strconv.Itoa(size)+` 2>/dev/null && printf tail-marker >> $L || exit 1; done; printf 'o ' | dd of=$D/output.log conv=notrunc 2>/dev/null && touch /tmp/big; exec sleep 600"]
ready = { cmd = ["test", "-e", "/tmp/big"], timeout = "60s" }
timeout = 1
`)
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	daemonPID, _ := e.DaemonPID()
	daemonBefore := rssOf(daemonPID)
	max := supervisor.MaxLogLine
	for _, args := range [][]string{{"logs", "--stdout", "-n", "5", id, "d1"}, {"logs", "--stdout", id, "d1"}, {"logs", "-n", "5", id, "d1"}, {"logs", id, "d1"}} {
		// The combined log's line holds the record's tag ("o "), not shown.
		cut := int64(max)
		if args[1] != "--stdout" {
			cut += int64(len(supervisor.RecordStdout))
		}
		wantEnd := supervisor.LineCut(size+int64(len("tail-marker"))-cut) + "\n"
		start := time.Now()
		out, rss := e.logsBounded(t, args...)
		if want := int64(max + len(wantEnd)); out.n != want || !strings.HasSuffix(out.tail.String(), "\x00"+wantEnd) {
			t.Errorf("airlock %s printed %d bytes ending %q, want %d ending %q", strings.Join(args, " "), out.n, out.tailString(), want, wantEnd)
		}
		t.Logf("airlock %s: peak RSS %d MiB, %v", strings.Join(args, " "), rss>>20, time.Since(start).Round(time.Millisecond))
	}
	if after := rssOf(daemonPID); daemonBefore > 0 && after > daemonBefore+50<<20 {
		t.Errorf("the control daemon's RSS grew from %d to %d MiB", daemonBefore>>20, after>>20)
	}
	e.MustRun("rm", "-f", id)
	e.assertClean()
}

// countingWriter counts what is written and keeps its last 64 bytes.
type countingWriter struct {
	mu   sync.Mutex
	n    int64
	tail bytes.Buffer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += int64(len(p))
	c.tail.Write(p[max(0, len(p)-64):])
	if c.tail.Len() > 64 {
		b := append([]byte(nil), c.tail.Bytes()[c.tail.Len()-64:]...)
		c.tail.Reset()
		c.tail.Write(b)
	}
	return len(p), nil
}

func (c *countingWriter) tailString() string {
	return strings.TrimLeft(c.tail.String(), "\x00") // the zeros tell nothing
}

// logsBounded runs airlock with args, its output counted rather than kept, and
// returns it with the process's peak RSS. It fails the test when the run fails,
// when it takes more than rssBound (then it is killed at once, so that an
// unbounded reader cannot take the host's memory), or when it runs for minutes.
func (e *env) logsBounded(t *testing.T, args ...string) (*countingWriter, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out := &countingWriter{}
	var stderr bytes.Buffer
	cmd := e.Command(ctx, args...)
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The peak is sampled (VmHWM, the high-water mark of the process's own memory
	// since its exec) while it runs: the kernel's ru_maxrss of a child is no use
	// here, since it counts the memory of the test process that forked it.
	var err error
	var peak int64
	watch := time.NewTicker(20 * time.Millisecond)
	defer watch.Stop()
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-watch.C:
			peak = max(peak, memOf(cmd.Process.Pid, "VmHWM:"))
			if peak > rssBound {
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("airlock %s took %d MiB of memory (killed), more than %d MiB", strings.Join(args, " "), peak>>20, rssBound>>20)
			}
		}
	}
	if err != nil {
		t.Fatalf("airlock %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, peak
}

// rssOf is the resident set size of a process (0 when it cannot be read).
func rssOf(pid int) int64 { return memOf(pid, "VmRSS:") }

// memOf is a size /proc/PID/status gives in kB under field (0 when it cannot be read).
func memOf(pid int, field string) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
