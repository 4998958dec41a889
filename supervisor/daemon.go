package supervisor

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// daemonRun is one daemon while the supervisor runs: its launches, restarts,
// readiness and shutdown. Its goroutine (run) ends only when stop is called.
type daemonRun struct {
	spec    *Daemon
	env     []string
	base    []string // the env before its entries, until a claim's values resolve them (Spec.Park)
	sig     syscall.Signal
	cred    *syscall.Credential // the daemon's user; nil: the supervisor's
	timeout time.Duration
	unit    time.Duration
	reset   time.Duration
	deps    []*daemonRun

	logs                   *daemonLogs
	stdoutPath, stderrPath string
	outputPath             string // output.log
	devnull                *os.File
	relays                 []*relay // of launches, until they end (run's goroutine only)

	r      *reaper
	status *statusWriter

	ctx    context.Context // cancelled by stop
	cancel context.CancelFunc

	started  chan struct{} // closed at the first launch attempt
	ready    chan struct{} // closed when the ready check passed (only with a check) or a one-shot completed
	finished chan struct{} // closed when no further launch will happen
	closeFin sync.Once

	readyResults chan<- readyResult // where the ready watcher reports
	results      chan<- stopResult  // where run reports its end
	leader       atomic.Int64       // the last launch's process (0 before the first)
	watchers     sync.WaitGroup

	gaveUp *gaveUp // set (by run) when max_restarts was reached
	// downHow, set by run when its policy decided that the daemon does not
	// run again (before daemon.exited says so), is how it ended: "exited
	// (code 0)", "gave up after 3 launches (exit 1)". A claim checks it.
	downHow atomic.Pointer[string]
	// Of a one-shot, set by run before it reports its end: it exited 0
	// (completed), or how it failed ("exit 3", "killed by SIGKILL",
	// "cannot start").
	completed bool
	failed    string
}

// stopResult is how a daemon ended at shutdown.
type stopResult struct {
	name   string
	killed bool
	gaveUp *gaveUp // the daemon had given up before the shutdown
	// A one-shot that had completed, or how one had failed ("" if not).
	completed bool
	failed    string
}

// gaveUp is a daemon that reached max_restarts, or that failed the same way
// on sameFailureLimit launches in a row before it was ever ready: its launches
// and how the last one ended.
type gaveUp struct {
	launches int
	inRow    int    // the last launches that failed the same way (when same)
	last     string // "exit 3", "killed by SIGKILL", "cannot start"
	same     bool   // it gave up on a repeated failure, not at max_restarts
}

// sameFailureLimit is how many launches in a row of a daemon whose ready check
// has not passed yet may fail the same way (same exit status, same output
// digits aside, or the same launch error) before it gives up, whatever
// max_restarts allows: a misconfigured daemon (initdb refusing to run as root)
// fails the start in seconds, not after every backoff delay.
const sameFailureLimit = 3

// gate is what a daemon naming this one in `after` waits for: readiness when
// it has a ready check, completion (exit 0) when it is a one-shot, else its
// first launch.
func (d *daemonRun) gate() <-chan struct{} {
	if d.spec.Ready != nil || d.spec.Oneshot {
		return d.ready
	}
	return d.started
}

func (d *daemonRun) stop() { d.cancel() }

func (d *daemonRun) markFinished() { d.closeFin.Do(func() { close(d.finished) }) }

// launch starts the daemon's command with its stdout and stderr on pipes that
// relays copy to its logs, and returns the launch's relays.
func (d *daemonRun) launch() (int, <-chan unix.WaitStatus, [2]*relay, error) {
	d.pruneRelays()
	w, rs, err := d.logs.pipes()
	if err != nil {
		return 0, nil, rs, err
	}
	pid, ch, err := d.r.start(d.proc(d.spec.Command, w[relayStdout], w[relayStderr]))
	if err == nil {
		d.leader.Store(int64(pid))
	}
	// The launch holds the write ends now (or failed): the relays see the
	// pipes' end when it and what it started are done with them.
	_ = w[relayStdout].Close()
	_ = w[relayStderr].Close()
	for _, r := range rs {
		d.relays = append(d.relays, r)
		r.start()
	}
	return pid, ch, rs, err
}

func (d *daemonRun) proc(argv []string, stdout, stderr *os.File) proc {
	return proc{
		argv:   argv,
		env:    d.env,
		dir:    d.spec.Cwd,
		files:  []uintptr{d.devnull.Fd(), stdout.Fd(), stderr.Fd()},
		cred:   d.cred,
		harden: *d.spec.Harden,
		// The daemon's user, or the sandbox's when it names none.
		userKey: "daemons." + d.spec.Name + ".user",
	}
}

// awaitLeader waits for the launched leader's exit, with what it wrote
// drained into the logs before it is looked at, reported or waited for; when
// the daemon is stopped meanwhile (a signal, another daemon's failure) it
// terminates it, ends the daemon and says stopped.
func (d *daemonRun) awaitLeader(pid int, ch <-chan unix.WaitStatus, launched [2]*relay) (st exitStatus, stopped bool) {
	select {
	case ws := <-ch:
		for _, r := range launched {
			r.drain()
		}
		return fromWaitStatus(ws), false
	case <-d.ctx.Done():
		killed, st := d.terminate(pid, ch)
		d.end(killed, &exitAt{pid: pid, st: st})
		return st, true
	}
}

// run waits for the daemon's `after` daemons, then launches it and restarts
// it by its policy until stop is called (a one-shot: see runOnce).
func (d *daemonRun) run() {
	name := d.spec.Name
	for _, dep := range d.deps {
		select {
		case <-dep.gate():
		case <-d.ctx.Done():
			d.end(false, nil)
			return
		}
	}
	if d.spec.Oneshot {
		d.runOnce()
		return
	}
	rs := newRestarter(d.spec.Restart, *d.spec.MaxRestarts, d.unit, d.reset)
	var loop failureLoop
	for launch := 1; ; launch++ {
		began := time.Now()
		outAt, errAt := d.logs.size(relayStdout), d.logs.size(relayStderr)
		pid, ch, launched, err := d.launch()
		if err != nil {
			d.note("airlock: cannot start daemon %s: %v", name, err)
		} else {
			// Before started is closed: the main command waits for it, so
			// every daemon.started precedes supervisor.ready in the stream.
			d.status.emit(StatusEvent{Kind: KindDaemonStarted, Daemon: name, PID: pid})
		}
		if launch == 1 {
			close(d.started)
			if d.spec.Ready != nil {
				d.watchers.Add(1)
				go d.watchReady()
			}
		}
		var st exitStatus
		if err == nil {
			var stopped bool
			if st, stopped = d.awaitLeader(pid, ch, launched); stopped {
				return
			}
		}
		dec, attempt, delay := rs.next(st, err != nil, time.Since(began))
		same, inRow := false, 0
		if dec == decideRestart && d.spec.Ready != nil && !d.isReady() && (err != nil || st.signaled() || st.code != 0) {
			var sig string
			if err != nil {
				sig = "cannot start: " + err.Error()
			} else {
				sig = st.String() + "\n" + launchOutput(d.stdoutPath, outAt) + "\n" + launchOutput(d.stderrPath, errAt)
			}
			if inRow = loop.add(sig); inRow >= sameFailureLimit {
				dec, same = decideGiveUp, true
			}
		} else {
			loop = failureLoop{}
		}
		if dec == decideDone || dec == decideGiveUp {
			d.setDown(dec, launch, st, err)
		}
		ev := StatusEvent{Kind: KindDaemonExited, Daemon: name, Reason: decisionReason(dec, d.spec.Restart)}
		if same {
			ev.Reason = fmt.Sprintf("giving up (the same failure on %d launches in a row before it was ready)", inRow)
		}
		if err != nil {
			ev.Reason = "cannot start: " + err.Error() + "; " + ev.Reason
		} else {
			ev.PID = pid
			setStatusFields(&ev, st)
		}
		d.status.emit(ev)
		if err == nil {
			// The leader is gone; what it left in its group goes too, before
			// a restart or a report (a shutdown meanwhile waits for it).
			d.stopGroup(pid)
		}
		switch dec {
		case decideDone:
			d.markFinished()
			<-d.ctx.Done()
			d.end(false, nil)
			return
		case decideGiveUp:
			reason := fmt.Sprintf("max_restarts %d reached after %d launches", *d.spec.MaxRestarts, launch)
			if same {
				reason = fmt.Sprintf("the same failure on %d launches in a row before it was ready", inRow)
			}
			d.status.emit(StatusEvent{Kind: KindDaemonGaveUp, Daemon: name, Attempt: launch, Reason: reason})
			d.gaveUp = &gaveUp{launches: launch, inRow: inRow, last: shortStatus(st, err), same: same}
			d.markFinished()
			<-d.ctx.Done()
			d.end(false, nil)
			return
		}
		ms := delay.Milliseconds()
		d.status.emit(StatusEvent{Kind: KindDaemonRestarting, Daemon: name, Attempt: attempt, DelayMS: &ms})
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-d.ctx.Done():
			t.Stop()
			d.end(false, nil)
			return
		}
	}
}

// setDown records that the daemon does not run again after launch ended
// with st (or the launch error err): not restarted, or given up.
func (d *daemonRun) setDown(dec decision, launch int, st exitStatus, err error) {
	how := "could not start"
	switch {
	case dec == decideGiveUp:
		how = fmt.Sprintf("gave up after %d launches (%s)", launch, shortStatus(st, err))
	case err == nil && st.signaled():
		how = "exited (" + st.String() + ")"
	case err == nil:
		how = fmt.Sprintf("exited (code %d)", st.code)
	}
	d.downHow.Store(&how)
}

// shortStatus is how a launch ended, as a shutdown line shows it: "exit 3",
// "killed by SIGKILL", "cannot start".
func shortStatus(st exitStatus, err error) string {
	switch {
	case err != nil:
		return "cannot start"
	case st.signaled():
		return st.String()
	}
	return fmt.Sprintf("exit %d", st.code)
}

// isReady reports whether the daemon's ready check has passed.
func (d *daemonRun) isReady() bool {
	select {
	case <-d.ready:
		return true
	default:
		return false
	}
}

// failureLoop counts the launches in a row that failed the same way.
type failureLoop struct {
	last string
	n    int
}

// add records a failed launch by its signature and returns how many launches
// in a row ended with it.
func (l *failureLoop) add(sig string) int {
	if sig != l.last || l.n == 0 {
		l.last, l.n = sig, 0
	}
	l.n++
	return l.n
}

// maxLaunchOutput bounds what of a launch's output is compared with the next.
const maxLaunchOutput = 4 << 10

// varyingRE matches what differs between two launches that fail the same way:
// numbers (pids, timestamps, ports) and hexadecimal addresses.
var varyingRE = regexp.MustCompile(`(?i)0x[0-9a-f]+|[0-9]+`)

// launchOutput returns what a log got since offset from (at most its last
// maxLaunchOutput bytes), with numbers masked.
func launchOutput(path string, from int64) string {
	text, _ := readTail(path, from, maxLaunchOutput)
	return varyingRE.ReplaceAllString(text, "#")
}

// readTail returns what a file holds from offset from to its end, at most its
// last limit bytes, and the offset where that starts ("" when the file cannot
// be read or holds nothing past from).
func readTail(path string, from, limit int64) (text string, start int64) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() <= from {
		return "", 0
	}
	start = max(from, st.Size()-limit)
	buf := make([]byte, st.Size()-start)
	n, _ := f.ReadAt(buf, start)
	return string(buf[:n]), start
}

// fileSize is the size of an open log (0 when unknown).
func fileSize(f *os.File) int64 {
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	return st.Size()
}

func decisionReason(dec decision, policy string) string {
	switch dec {
	case decideRestart:
		return "restarting (restart = " + policy + ")"
	case decideGiveUp:
		return "giving up (max_restarts reached)"
	}
	return "not restarted (restart = " + policy + ")"
}

func setStatusFields(ev *StatusEvent, st exitStatus) {
	if st.signaled() {
		ev.Signal = signalName(st.signal)
	} else {
		ev.ExitCode = ptr(st.code)
	}
}

type exitAt struct {
	pid int
	st  exitStatus
}

// end reports the daemon's end at shutdown: an event and a stopResult.
func (d *daemonRun) end(killed bool, last *exitAt) {
	d.markFinished()
	ev := StatusEvent{Kind: KindDaemonStopped, Daemon: d.spec.Name, Reason: "shut down"}
	if killed {
		ev.Kind, ev.Reason = KindDaemonKilled, fmt.Sprintf("still running %ds after %s", *d.spec.Timeout, d.spec.Signal)
	}
	if last != nil {
		ev.PID = last.pid
		setStatusFields(&ev, last.st)
	}
	d.watchers.Wait()
	// Its output reaches the logs before its end is reported.
	d.awaitRelays()
	d.status.emit(ev)
	d.results <- stopResult{name: d.spec.Name, killed: killed, gaveUp: d.gaveUp, completed: d.completed, failed: d.failed}
}

// stopGroup ends what is left of a launch's process group after its leader
// exited by itself: the daemon's signal to the group, then, after timeout
// (0 = never), SIGKILL. It returns once no process of the group is left.
func (d *daemonRun) stopGroup(pgid int) {
	if !groupAlive(pgid) {
		return
	}
	d.note("airlock: daemon %s: its leader exited; sending %s to the rest of its process group", d.spec.Name, d.spec.Signal)
	killGroup(pgid, d.sig)
	deadline, stop := d.timeoutTimer()
	defer stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for groupAlive(pgid) {
		select {
		case <-tick.C:
		case <-deadline:
			d.note("airlock: daemon %s: its process group was still running %ds after %s; killing it", d.spec.Name, *d.spec.Timeout, d.spec.Signal)
			killGroup(pgid, unix.SIGKILL)
			awaitGroupGone(pgid)
			return
		}
	}
}

// timeoutTimer returns a channel that fires once the daemon's timeout has
// passed (never when it is 0) and a function that releases its timer.
func (d *daemonRun) timeoutTimer() (<-chan time.Time, func()) {
	if d.timeout <= 0 {
		return nil, func() {}
	}
	t := time.NewTimer(d.timeout)
	return t.C, func() { t.Stop() }
}

// awaitGroupGone gives a SIGKILLed group a moment to be gone (and reaped).
func awaitGroupGone(pgid int) {
	for i := 0; i < 1000 && groupAlive(pgid); i++ {
		time.Sleep(5 * time.Millisecond)
	}
}

// terminate stops a running launch: its signal to the whole process group,
// then, after timeout (0 = never), SIGKILL to the group. The launch counts as
// shut down when its leader and every other process of its group are gone
// before the timeout.
func (d *daemonRun) terminate(pgid int, ch <-chan unix.WaitStatus) (killed bool, st exitStatus) {
	killGroup(pgid, d.sig)
	deadline, stop := d.timeoutTimer()
	defer stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	leaderDone := false
	for {
		select {
		case ws := <-ch:
			st, leaderDone, ch = fromWaitStatus(ws), true, nil
			if !groupAlive(pgid) {
				return false, st
			}
		case <-tick.C:
			if leaderDone && !groupAlive(pgid) {
				return false, st
			}
		case <-deadline:
			killGroup(pgid, unix.SIGKILL)
			if !leaderDone {
				st = fromWaitStatus(<-ch)
			}
			// SIGKILL cannot be caught; give the rest of the group a moment
			// to be gone (and reaped) before reporting.
			awaitGroupGone(pgid)
			return true, st
		}
	}
}
