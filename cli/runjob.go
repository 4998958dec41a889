package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/trust"
)

// runJob is one `airlock run` on its way: what its steps share. The steps, in
// order: prepare (manifest, trust, target, image), create, start (attach, resume,
// started), wait (signals, failure, the main command's end); finish removes the
// sandbox (or announces it kept) whatever happened.
type runJob struct {
	a      *app
	o      runOptions
	parent context.Context
	su     *setup

	r             *manifest.Resolved
	layers        *trust.Snapshot
	tgt           *target
	projectCopied bool
	protected     []string
	outCopy       *projectfs.Output
	c             *client.Client
	secretValues  map[string]string
	tty, stdin    bool
	req           *client.CreateRequest
	// removeOnExit: the daemon removes the sandbox once its main command
	// exited; waitRemoved: the run returns once it is removed.
	removeOnExit, waitRemoved bool

	id      string
	session *layerSession
	main    *mainStream
	// createdSeq is the sequence of an event of the sandbox once created:
	// what the run waits for comes after it.
	createdSeq uint64
	failed     <-chan client.Event
	restore    func()
	mainExited bool
	// health is the daemon's answer to a health check asked once the main
	// command ended (askHealth).
	health     chan error
	daemonLost atomic.Bool
}

// prepare does what comes before the sandbox is asked for: the manifest and
// its layers checked, the flags read, the target and the daemon found, the
// image made, and the create request.
func (j *runJob) prepare(args []string) error {
	a, o, ctx, setupErr := j.a, j.o, j.su.ctx, j.su.err
	a.askHealthEarly(ctx)
	r, layers, err := a.loadManifestLayers()
	if err != nil {
		return err
	}
	j.r, j.layers = r, layers
	if err := a.checkLayers(ctx, r, layers); err != nil {
		return setupErr(err)
	}
	a.steps.mark("manifest")
	envSecrets, err := a.parseEnvFlagsPrivate(o.env)
	if err != nil {
		return err
	}
	labels, err := parseLabels(o.labels)
	if err != nil {
		return err
	}
	if j.outCopy, err = a.runOutput(r, o); err != nil {
		return err
	}
	a.warnPrivileged(r)
	if err := ctx.Err(); err != nil {
		return setupErr(err)
	}

	tgt, err := a.target()
	if err != nil {
		return setupErr(err)
	}
	j.tgt = tgt
	j.projectCopied = tgt.projectCopied(r)
	if tgt.clientFiles {
		if err := checkClientFiles(r); err != nil {
			return err
		}
	}
	// The layers the sandbox could write are read-only in it (docs/trust.md).
	j.protected = a.protectLayers(r, layers, j.projectCopied)
	if !o.noPool {
		a.beginPool(r, j.projectCopied, j.protected)
	}
	c, err := a.daemonClientAgain(ctx)
	if err != nil {
		return setupErr(err)
	}
	j.c = c
	a.steps.mark("daemon")
	// What the sandbox is made from (through a daemon on another machine,
	// the image built from the context sent instead of [sandbox.build]).
	made, err := a.prepareViaDaemon(ctx, c, r, tgt.engine)
	if err != nil {
		return setupErr(err)
	}
	wm, secretValues, err := wireManifest(made)
	if err != nil {
		return err
	}
	j.secretValues = secretValues
	j.tty = isTerminal(a.stdin) && isTerminal(a.stdout)
	j.stdin = j.tty || forwardsStdin(a.stdin)
	// A run sandbox is reaped when its CLI is gone, unless it is kept: then it
	// stays until `airlock rm`.
	cliPid, cliStart := os.Getpid(), processStart(os.Getpid())
	if o.keep {
		cliPid, cliStart = 0, ""
	}
	// Without --keep or --output nothing is needed of the sandbox once its main
	// command exited: the daemon removes it then, and the CLI returns the code.
	j.removeOnExit = !o.keep && len(o.outputs) == 0
	// The run returns once CMD exited and its output is out, the daemons that
	// are slow to stop, and the Engine's teardown of the container (~0.2 s),
	// finishing in the background. Not for a kept sandbox (announced once
	// stopped) or the --output of a copied project (read once stopped).
	fastEnd := !o.wait && !r.Sandbox.WaitForDaemons && !o.keep && !(len(o.outputs) > 0 && j.projectCopied)
	// --wait (or sandbox.wait_for_daemons) returns as `docker run --rm` does:
	// once the sandbox is removed, so that nothing of it is left when it
	// returns (ps -a lists nothing of it, nor does docker ps -a).
	j.waitRemoved = (o.wait || r.Sandbox.WaitForDaemons) && !o.keep
	j.req = &client.CreateRequest{
		ID: o.id, Kind: client.KindRun, Manifest: wm, Secrets: secretValues, Command: args, EnvSecrets: envSecrets,
		Workdir: o.workdir, TTY: j.tty, Stdin: j.stdin, Labels: labels, Quiet: a.opts.quiet,
		CLIPid: cliPid, CLIStart: cliStart, Engine: tgt.engine, RemoveOnExit: j.removeOnExit, FastEnd: fastEnd, ClientFiles: tgt.clientFiles,
		NoPool: o.noPool, ToolEnv: a.toolEnv(),
	}
	if j.req.ID == "" && !mayUsePool(r, o) {
		// The CLI names the sandbox, so that a create whose answer a daemon
		// that went away never sent can be found (or asked for again). Not
		// when a warm pool may serve the run: the run then keeps the parked
		// sandbox's ID (one given with --id is the run's: docs/pool.md).
		j.req.ID = ids.New()
	}
	return nil
}

// finish runs once the run ends, however: the egress summary and the
// breakdown when asked for, and the sandbox removed (by the daemon that knew
// to, else asked of the one that answers now) or announced kept.
func (j *runJob) finish() {
	a, o, c, id := j.a, j.o, j.c, j.id
	bg, bcancel := context.WithTimeout(context.WithoutCancel(j.parent), 2*time.Minute)
	defer bcancel()
	if manifest.HasEgress(j.r) && !a.opts.quiet {
		// The denials are counted until the sandbox is removed (or kept),
		// or as it stops when the daemon says so (its sandbox.stopped
		// event's extra egress_counted).
		defer func() {
			wctx, wcancel := context.WithTimeout(bg, 30*time.Second)
			sb, _, _ := c.WaitState(wctx, id, client.StateStopped, client.StateFailed, client.StateDeleted)
			if !o.keep && sb != nil && sb.State == client.StateStopped && !egressCountedAtStop(wctx, c, id) {
				_, _, _ = c.WaitState(wctx, id, client.StateDeleted, client.StateFailed)
			}
			wcancel()
			a.egressSummary(bg, c, id)
		}()
	}
	if a.opts.logLevel == "debug" {
		// The whole breakdown, removal included: wait for its end.
		defer func() {
			a.steps.mark("end")
			if !o.keep {
				wctx, wcancel := context.WithTimeout(bg, 30*time.Second)
				_, _, _ = c.WaitState(wctx, id, client.StateDeleted)
				wcancel()
			}
			a.printBreakdown(bg, c, id)
			fmt.Fprintf(a.stderr, "airlock: debug: steps of this command (since its start): %s\n", &a.steps)
		}()
	}
	if o.keep {
		// The daemon records the stop (and the supervisor's last reports)
		// before the sandbox is announced kept; through the one that
		// answers next if it goes away meanwhile.
		cur, _ := retryDaemon(a, bg, func() (*client.Sandbox, error) {
			sb, _, err := c.WaitState(bg, id, client.StateStopped, client.StateFailed)
			return sb, err
		})
		if cur != nil && cur.State != client.StateFailed {
			if !a.opts.quiet {
				fmt.Fprintf(a.stderr, "airlock: kept sandbox %s (airlock logs %s; airlock rm %s)\n", id, id, id)
			}
			return
		}
	}
	removed := func() {
		if _, _, err := c.WaitState(bg, id, client.StateDeleted); err != nil {
			fmt.Fprintf(a.stderr, "airlock: cannot confirm sandbox %s was removed: %v\n", id, err)
		}
	}
	if j.mainExited && j.removeOnExit && !j.daemonLost.Load() && !a.daemonLost.Load() {
		if err := <-j.health; err == nil {
			// The daemon removes it (see RemoveOnExit).
			if j.waitRemoved {
				removed()
			}
			return
		}
	}
	// The daemon that knew to remove the sandbox may be gone: the one that
	// answers now (started again if need be) removes it.
	if _, err := retryDaemon(a, bg, func() (*client.Sandbox, error) { return c.Delete(bg, id) }); err != nil {
		fmt.Fprintf(a.stderr, "airlock: %v\n", err)
		return
	}
	if j.mainExited && !j.waitRemoved {
		// The main command's code is known and its output copied: the
		// daemon, which accepted the deletion, removes the containers and
		// network while the CLI returns (it retries, and its reaper finishes
		// any removal left in deleting).
		return
	}
	removed()
}

// start takes the created sandbox to its start: the trust session begun, the
// client's files uploaded, the main command's streams attached, the sandbox
// resumed (started) and its start seen, through the daemon that answers if
// the first goes away.
func (j *runJob) start(waitCtx context.Context) error {
	a, c, id, ctx, setupErr := j.a, j.c, j.id, j.su.ctx, j.su.err
	// Created, not started (resume starts it): the trust record knows it
	// before any of its code runs. It is written while the main command's
	// streams are attached (a local file, a request to the daemon).
	type begun struct {
		session *layerSession
		err     error
	}
	began := make(chan begun, 1)
	go func() {
		session, err := a.beginLayers(j.r, j.layers, j.projectCopied, len(j.o.outputs) > 0, id, j.protected)
		began <- begun{session, err}
	}()
	awaitBegun := func() error {
		b := <-began
		j.session = b.session
		return b.err
	}
	if j.tgt.clientFiles {
		if err := awaitBegun(); err != nil {
			return setupErr(err)
		}
		if err := a.uploadFiles(ctx, c, id, j.r, j.projectCopied); err != nil {
			return setupErr(err)
		}
	}
	// The main command's streams, through the daemon, attached before the
	// start so that no output is missed; stdin forwarded once the start was
	// asked (heldReader).
	var stdin io.Reader
	started := make(chan struct{})
	var startOnce sync.Once
	release := func() { startOnce.Do(func() { close(started) }) }
	defer release()
	if j.stdin {
		stdin = heldReader{r: a.stdin, open: started}
	}
	var err error
	j.main, err = a.attachMain(waitCtx, c, id, stdin, &j.daemonLost)
	if !j.tgt.clientFiles {
		if berr := awaitBegun(); berr != nil && err == nil {
			return setupErr(berr)
		}
	}
	if err != nil {
		return setupErr(runFailure(ctx, c, id, err))
	}
	a.steps.mark("attach")
	j.failed = j.waitFor(waitCtx, "sandbox.failed", true)
	if j.tty {
		j.restore = rawTerminal(a.stdin)
	}
	// The start is waited for from before the resume is asked (one round
	// trip less): from the sandbox's first event, not from createdSeq: a
	// daemon started again may have recorded the start already (found
	// started as it recovered) before this CLI read the record.
	waitStart := func() error {
		_, err := c.WaitEvent(ctx, id, 0, "sandbox.started", "sandbox.ready", "sandbox.failed")
		return err
	}
	firstWait := make(chan error, 1)
	go func() { firstWait <- waitStart() }()
	// A daemon that goes away here (killed, upgraded) is started again and
	// asked again: it kept the created sandbox for this CLI.
	resume := func() (*client.Sandbox, error) {
		var req *client.ResumeRequest
		if j.daemonLost.Load() {
			req = &client.ResumeRequest{Secrets: j.secretValues} // a new daemon has no values
		}
		sb, err := c.Resume(ctx, id, req)
		if lostDaemon(err) {
			j.daemonLost.Store(true)
		}
		return sb, err
	}
	// On the main command's stream (no request of its own), unless a daemon
	// went away meanwhile: the one that answers now needs the values again.
	if j.daemonLost.Load() || j.main.resume() != nil {
		if _, err := retryDaemon(a, ctx, resume); err != nil {
			if !lostDaemon(err) {
				return setupErr(runFailure(ctx, c, id, err))
			}
			return setupErr(setupDaemonFailure(err))
		}
	}
	release()
	a.steps.mark("resume")
	// resumeAgain: a daemon went away since the resume was answered, and the
	// one that answers now may not have seen it (the sandbox, left pending to
	// this CLI, would wait for it forever): ask it again, on the daemon that
	// answers, before waiting (a started sandbox refuses it, harmlessly).
	resumeAgain := false
	if _, err := retryDaemon(a, ctx, func() (*client.Sandbox, error) {
		if resumeAgain {
			if _, rerr := c.Resume(ctx, id, &client.ResumeRequest{Secrets: j.secretValues}); rerr != nil && lostDaemon(rerr) {
				return nil, rerr
			}
			resumeAgain = false
		}
		var err error
		if firstWait != nil {
			// A main command that ended with its code started: its end
			// may come before sandbox.started is written.
			select {
			case err = <-firstWait:
			case <-j.main.exited:
			}
			firstWait = nil
		} else {
			err = waitStart()
		}
		if lostDaemon(err) {
			j.daemonLost.Store(true)
			resumeAgain = true
		}
		return nil, err
	}); err != nil {
		return setupErr(setupDaemonFailure(err))
	}
	return nil
}

// waitFor sends on the returned channel the sandbox's first event of kind
// after the sandbox was created, following the daemon that answers
// next if one goes away (lost: and marks that the daemon was lost).
func (j *runJob) waitFor(waitCtx context.Context, kind string, lost bool) <-chan client.Event {
	got := make(chan client.Event, 1)
	go func() {
		for {
			ev, err := j.c.WaitEvent(waitCtx, j.id, j.createdSeq, kind)
			if err == nil {
				got <- ev
				return
			}
			if waitCtx.Err() != nil || !lostDaemon(err) {
				return
			}
			// The control daemon went away (killed, upgraded): the sandbox runs
			// on; watch again through the one that answers next.
			if lost {
				j.daemonLost.Store(true)
			}
			if _, err := retryDaemon(j.a, waitCtx, func() (*client.Sandbox, error) { return j.c.Get(waitCtx, j.id) }); err != nil {
				return
			}
		}
	}()
	return got
}

// askHealth asks, once the main command ended, whether the daemon that
// knew to remove the sandbox still answers (finish reads the answer): asked
// while the trust record and --output are done.
func (j *runJob) askHealth() {
	j.health = make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(j.parent), 30*time.Second)
		defer cancel()
		_, err := j.c.Health(ctx)
		j.health <- err
	}()
}

// wait follows the started sandbox until its main command ends: signals go
// to the supervisor, which forwards them to CMD; a failure ends the run.
func (j *runJob) wait(waitCtx context.Context) error {
	a, c, id, o := j.a, j.c, j.id, j.o
	// mainDone ends the run with the main command's exit code, once its output
	// is drained and --output copied back.
	mainDone := func(code int, daemonsStopping bool) error {
		at := time.Now()
		j.mainExited = true
		a.steps.mark("main exited")
		j.askHealth()
		// After --output wrote. Once the primary has exited the sandbox
		// writes no more: its session ends here; with daemons still shutting
		// down (a fast end) it stays open until the sandbox is found stopped.
		defer j.session.ended(!daemonsStopping, at)
		j.restore()
		if err := a.copyOutputs(c, id, j.projectCopied, j.outCopy, o.outputs); err != nil {
			// The copy failed (exit 125): say what the command's code was.
			return withCode(ExitAirlock, fmt.Errorf("%w (the command exited with code %d)", err, code))
		}
		if code != 0 {
			return exitCode(code)
		}
		return nil
	}
	// Until the supervisor reports the sandbox ready it may not catch signals
	// yet (the Go runtime ends a PID 1 that has not subscribed to SIGINT with
	// status 2), and the main command has not started: a signal then is an
	// interrupted setup, handled as before sandbox.started.
	readyEv := j.waitFor(waitCtx, "sandbox.ready", false)
	ready := make(chan struct{})
	go func() {
		select {
		case <-readyEv:
			close(ready)
		case <-waitCtx.Done():
		}
	}()
	// A sandbox from a warm pool whose daemon went away during the setup may
	// never have got its claim (it went through that daemon's attach): its
	// supervisor would wait for it while the CLI waits for CMD. One that is
	// not ready within sandbox.ready_timeout (which any start must meet)
	// failed: it is removed (the deferred removal) and the run ends 125.
	var claimLost <-chan time.Time
	if j.req.ID == "" && (j.daemonLost.Load() || a.daemonLost.Load()) {
		wait, err := time.ParseDuration(j.r.Sandbox.ReadyTimeout)
		if err != nil || wait <= 0 {
			wait = time.Minute
		}
		timer := time.NewTimer(wait + 5*time.Second)
		defer timer.Stop()
		claimLost = timer.C
	}
	// Running: signals go to the supervisor, which forwards them to CMD.
	for {
		select {
		case <-claimLost:
			select {
			case <-ready:
				continue
			default:
			}
			j.restore()
			return withCode(ExitAirlock, errors.New("the daemon restarted before the pooled sandbox got its command, which it never ran"))
		case s := <-j.su.sigs:
			select {
			case <-ready:
			default:
				j.restore()
				return interruptedBeforeReady(s)
			}
			if sig, ok := s.(syscall.Signal); ok {
				_ = j.main.signal(strconv.Itoa(int(sig)))
			}
		case ev := <-j.failed:
			// The supervisor failing to run CMD (126, 127) or a daemon not
			// getting ready (125) also ends the container: its code wins, and
			// the supervisor already said why on stderr.
			select {
			case end := <-j.main.ended:
				if end.err == nil {
					return mainDone(end.code, end.daemonsStopping)
				}
			case <-time.After(3 * time.Second):
			}
			j.restore()
			return failure(ev)
		case end := <-j.main.ended:
			if end.err != nil {
				j.restore()
				return end.err
			}
			return mainDone(end.code, end.daemonsStopping)
		}
	}
}
