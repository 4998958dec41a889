package supervisor

import (
	"fmt"
	"strings"
)

// A one-shot daemon (Daemon.Oneshot) is a setup step: it is launched once, in
// its after order, and never restarted. Its exit 0, once the rest of its
// process group is gone, completes it: that is its readiness, what the
// daemons naming it in after and the main command wait for. Any other end (a
// non-zero exit, death by a signal, a launch that failed) fails the start as a
// ready check that does not pass does: 125, with its name, how it ended and
// the last lines of its output.

// oneshotFailedReason is the reason of a failed one-shot's daemon.exited.
const oneshotFailedReason = "one-shot failed: not restarted; the start fails"

// oneshotTailLines is how many of the last lines of a failed one-shot's output
// its message shows, each at most oneshotTailLine bytes.
const (
	oneshotTailLines = 10
	oneshotTailLine  = 256
)

// runOnce is run for a one-shot daemon (its after daemons are ready).
func (d *daemonRun) runOnce() {
	name := d.spec.Name
	pid, ch, launched, err := d.launch()
	if err != nil {
		d.note("airlock: cannot start daemon %s: %v", name, err)
		close(d.started)
		d.status.emit(StatusEvent{Kind: KindDaemonExited, Daemon: name, Reason: "cannot start: " + err.Error() + "; " + oneshotFailedReason})
		d.oneshotFailed("cannot start: "+err.Error(), "cannot start", false)
		return
	}
	d.status.emit(StatusEvent{Kind: KindDaemonStarted, Daemon: name, PID: pid})
	close(d.started)
	// A start interrupted while it runs stops it like any running daemon.
	st, stopped := d.awaitLeader(pid, ch, launched)
	if stopped {
		return
	}
	ok := !st.signaled() && st.code == 0
	if !ok {
		ev := StatusEvent{Kind: KindDaemonExited, Daemon: name, PID: pid, Reason: oneshotFailedReason}
		setStatusFields(&ev, st)
		d.status.emit(ev)
	}
	// Nothing of the step outlives it: what it left in its group is stopped
	// before anything that waits for it starts.
	d.stopGroup(pid)
	if !ok {
		short := st.String()
		if !st.signaled() {
			short = fmt.Sprintf("exit %d", st.code)
		}
		d.oneshotFailed(st.String(), short, true)
		return
	}
	d.status.emit(StatusEvent{Kind: KindDaemonCompleted, Daemon: name, PID: pid, ExitCode: ptr(0)})
	d.completed = true
	close(d.ready)
	d.readyResults <- readyResult{name: name}
	d.markFinished()
	<-d.ctx.Done()
	d.end(false, nil)
}

// oneshotFailed reports a failed one-shot: the start fails with a message
// naming it, how it ended (how; short for its shutdown line) and, when it
// ran, the last lines of its output. The daemon then waits for the shutdown.
func (d *daemonRun) oneshotFailed(how, short string, ran bool) {
	err := fmt.Errorf("daemon %s (oneshot) failed: %s; see %s", d.spec.Name, how, d.outputPath)
	if ran {
		// Its output, up to a last line without a newline, is in the log
		// once the relays ended (its group is gone).
		d.awaitRelays()
		if tail := outputTail(d.outputPath, oneshotTailLines); tail != "" {
			err = fmt.Errorf("%w; its last output lines:\n%s", err, tail)
		}
	}
	d.failed = short
	d.markFinished()
	d.readyResults <- readyResult{name: d.spec.Name, err: err}
	<-d.ctx.Done()
	d.end(false, nil)
}

// outputTail returns the last n lines of a daemon's combined log (output.log)
// without their record tags, each indented by two spaces and cut at
// oneshotTailLine bytes, or "" when it holds none.
func outputTail(path string, n int) string {
	text, off := readTail(path, 0, 16<<10)
	if off > 0 {
		// The window starts inside a record: drop that part.
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[i+1:]
		}
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b strings.Builder
	for _, l := range lines {
		l, ok := strings.CutPrefix(l, RecordStdout)
		if !ok {
			l = strings.TrimPrefix(l, RecordStderr)
		}
		if len(l) > oneshotTailLine {
			l = l[:oneshotTailLine] + "…"
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("  " + strings.ToValidUTF8(l, "\uFFFD"))
	}
	if strings.TrimSpace(b.String()) == "" {
		return ""
	}
	return b.String()
}
