package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/exitcode"
	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/internal/proc"
	"github.com/airlock-dev/airlock/internal/termsafe"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/trust"
)

func init() { addCommand(newRunCommand) }

type runOptions struct {
	keep    bool
	wait    bool // wait for the daemons' shutdown (--wait)
	noPool  bool // start cold although the manifest has a warm pool (--no-pool)
	id      string
	labels  []string
	env     []string
	workdir string
	outputs []string
	// outputMax is --output-max ("" = artifacts.output_max of config.toml).
	outputMax string
}

func newRunCommand(a *app) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARG...]",
		Short: "Run CMD in a fresh sandbox and exit with its code; nothing is left behind",
		Long: "run creates a fresh sandbox from the project's manifest, starts its services and daemons, runs CMD\n" +
			"with stdout and stderr streamed apart (a TTY only when stdin and stdout are terminals), shuts the\n" +
			"daemons down, removes every object of the sandbox and exits with CMD's exit code. It returns once CMD\n" +
			"exited and its output is out: daemons that take longer than 20 ms to stop finish in the background\n" +
			"(airlock events shows them), and the sandbox is removed in the background (ps -a may list it exited\n" +
			"for a moment). --wait or sandbox.wait_for_daemons return as docker run --rm does: once every daemon\n" +
			"shut down and the sandbox is removed.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.run(cmd.Context(), o, args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	f := cmd.Flags()
	f.BoolVar(&o.keep, "keep", false, "leave the stopped sandbox for airlock logs and airlock rm")
	f.BoolVar(&o.noPool, "no-pool", false, "start a new sandbox although the manifest has a warm pool ([sandbox.pool])")
	f.BoolVar(&o.wait, "wait", false, "return only once every daemon shut down, with all the shutdown lines, and the sandbox is removed (as docker run --rm)")
	f.StringVar(&o.id, "id", "", "sandbox ID (default: a new UUID)")
	f.StringArrayVar(&o.labels, "label", nil, "label KEY=VALUE on the sandbox (repeatable)")
	f.StringArrayVarP(&o.env, "env", "e", nil, "environment NAME=VALUE (or NAME, from the host) for CMD (repeatable)")
	f.StringVarP(&o.workdir, "workdir", "w", "", "working directory of CMD inside the sandbox")
	f.StringArrayVar(&o.outputs, "output", nil, "copy this project path back to the host after CMD exits, when the project was copied in (repeatable; it only writes, never deletes)")
	f.StringVar(&o.outputMax, "output-max", "", "the most --output may write on the host, e.g. 500MiB (default: artifacts.output_max of config.toml, 1GiB)")
	return cmd
}

// signals the CLI forwards to the sandbox's main command (design.md §6).
var forwardedSignals = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2}

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

	id         string
	session    *layerSession
	main       *mainStream
	before     *client.Sandbox
	failed     <-chan client.Event
	restore    func()
	mainExited bool
	daemonLost atomic.Bool
}

func (a *app) run(parent context.Context, o runOptions, args []string) error {
	if parent == nil {
		parent = context.Background()
	}
	// Setup: from the first step, a signal cancels it, everything made is
	// removed, exit 130 (a Ctrl-C while the manifest loads must not kill the CLI
	// with the signal's default action).
	su := newSetup(parent)
	defer su.close()
	j := &runJob{a: a, o: o, parent: parent, su: su, restore: func() {}}
	if err := j.prepare(args); err != nil {
		return err
	}
	id, err := a.createRun(su.ctx, j.c, j.req)
	if err != nil {
		return su.err(err)
	}
	j.id = id
	defer j.finish()
	qctx, qcancel := context.WithCancel(su.ctx)
	defer qcancel()
	a.sayQueued(qctx, j.c, id, 0)
	// j.id may change here: a sandbox whose making a daemon that went away cut
	// short is replaced (the deferred removal follows j.id).
	if err := a.awaitCreated(su.ctx, j.c, j.req, o.id != "", &j.id); err != nil {
		return su.err(err)
	}
	waitCtx, waitCancel := context.WithCancel(context.WithoutCancel(parent))
	defer waitCancel()
	defer func() { j.restore() }()
	if err := j.start(waitCtx); err != nil {
		j.restore()
		return err
	}
	qcancel()
	su.end()
	if sig := su.interrupted(); sig != nil {
		j.restore()
		return interruptedDuringSetup(sig)
	}
	if j.tty {
		followResize(waitCtx, a.stdout, func(h, w uint) { _ = j.main.resize(h, w) })
	}
	return j.wait(waitCtx)
}

// prepare does what comes before the sandbox is asked for: the manifest and
// its layers checked, the flags read, the target and the daemon found, the
// image made, and the create request.
func (j *runJob) prepare(args []string) error {
	a, o, ctx, setupErr := j.a, j.o, j.su.ctx, j.su.err
	r, layers, err := a.loadManifestLayers()
	if err != nil {
		return err
	}
	j.r, j.layers = r, layers
	if err := a.checkLayers(ctx, r, layers); err != nil {
		return setupErr(err)
	}
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
		// when a warm pool may serve the run: a parked sandbox has its own ID
		// (a create that names one is served cold).
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
		// The denials are counted until the sandbox is removed (or kept).
		defer func() {
			want := client.StateDeleted
			if o.keep {
				want = client.StateStopped
			}
			wctx, wcancel := context.WithTimeout(bg, 30*time.Second)
			_, _, _ = c.WaitState(wctx, id, want, client.StateFailed, client.StateDeleted)
			wcancel()
			a.egressSummary(bg, c, id)
		}()
	}
	if a.opts.logLevel == "debug" {
		// The whole breakdown, removal included: wait for its end.
		defer func() {
			if !o.keep {
				wctx, wcancel := context.WithTimeout(bg, 30*time.Second)
				_, _, _ = c.WaitState(wctx, id, client.StateDeleted)
				wcancel()
			}
			a.printBreakdown(bg, c, id)
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
		if _, err := c.Health(bg); err == nil {
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
	// before any of its code runs.
	session, err := a.beginLayers(j.r, j.layers, j.projectCopied, len(j.o.outputs) > 0, id, j.protected)
	if err != nil {
		return setupErr(err)
	}
	j.session = session
	if j.tgt.clientFiles {
		if err := a.uploadFiles(ctx, c, id, j.r, j.projectCopied); err != nil {
			return setupErr(err)
		}
	}
	// The main command's streams, through the daemon, attached before the
	// start so that no output is missed.
	if j.main, err = a.attachMain(waitCtx, c, id, j.stdin, &j.daemonLost); err != nil {
		return setupErr(runFailure(ctx, c, id, err))
	}
	if j.before, err = retryDaemon(a, ctx, func() (*client.Sandbox, error) {
		sb, err := c.Get(ctx, id)
		if lostDaemon(err) {
			j.daemonLost.Store(true)
		}
		return sb, err
	}); err != nil {
		return setupErr(setupDaemonFailure(err))
	}
	j.failed = j.waitFor(waitCtx, "sandbox.failed", true)
	if j.tty {
		j.restore = rawTerminal(a.stdin)
	}
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
	if _, err := retryDaemon(a, ctx, resume); err != nil {
		if !lostDaemon(err) {
			return setupErr(runFailure(ctx, c, id, err))
		}
		return setupErr(setupDaemonFailure(err))
	}
	if _, err := retryDaemon(a, ctx, func() (*client.Sandbox, error) {
		// From the sandbox's first event, not from before.LastSeq: a daemon
		// started again may have recorded the start already (found started
		// as it recovered) before this CLI read the record.
		_, err := c.WaitEvent(ctx, id, 0, "sandbox.started", "sandbox.ready", "sandbox.failed")
		if lostDaemon(err) {
			j.daemonLost.Store(true)
			// The new daemon may not have seen the resume: ask again (a
			// started sandbox refuses it, harmlessly).
			if _, rerr := c.Resume(ctx, id, &client.ResumeRequest{Secrets: j.secretValues}); rerr != nil && lostDaemon(rerr) {
				return nil, rerr
			}
		}
		return nil, err
	}); err != nil {
		return setupErr(setupDaemonFailure(err))
	}
	return nil
}

// waitFor sends on the returned channel the sandbox's first event of kind
// after the record read before the start, following the daemon that answers
// next if one goes away (lost: and marks that the daemon was lost).
func (j *runJob) waitFor(waitCtx context.Context, kind string, lost bool) <-chan client.Event {
	got := make(chan client.Event, 1)
	go func() {
		for {
			ev, err := j.c.WaitEvent(waitCtx, j.id, j.before.LastSeq, kind)
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

// wait follows the started sandbox until its main command ends: signals go
// to the supervisor, which forwards them to CMD; a failure ends the run.
func (j *runJob) wait(waitCtx context.Context) error {
	a, c, id, o := j.a, j.c, j.id, j.o
	// mainDone ends the run with the main command's exit code, once its output
	// is drained and --output copied back.
	mainDone := func(code int, daemonsStopping bool) error {
		j.mainExited = true
		// After --output wrote. Once the primary has exited the sandbox
		// writes no more: its session ends here; with daemons still shutting
		// down (a fast end) it stays open until the sandbox is found stopped.
		defer j.session.ended(!daemonsStopping)
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

func interruptedDuringSetup(s os.Signal) error {
	return withCode(interruptCode(s), errors.New("interrupted during setup; nothing was left behind"))
}

// interruptedBeforeReady is interruptedDuringSetup once the sandbox started:
// its daemons or services were getting ready.
func interruptedBeforeReady(s os.Signal) error {
	name := s.String()
	if sig, ok := s.(syscall.Signal); ok {
		name = unix.SignalName(sig)
	}
	return withCode(interruptCode(s), fmt.Errorf("interrupted during setup (%s while the sandbox was getting ready); nothing was left behind", name))
}

// interruptCode is the exit code of a setup ended by signal s: 130 for
// SIGINT, else 128+N.
func interruptCode(s os.Signal) int {
	if sig, ok := s.(syscall.Signal); ok && sig != syscall.SIGINT {
		return 128 + int(sig)
	}
	return ExitInterrupted
}

// processStart returns a process's start time, which tells the reaper a reused pid
// from this CLI.
func processStart(pid int) string {
	_, start, _ := proc.State(pid)
	return start
}

// copyOutputs copies each --output path from a sandbox whose project was copied in
// back into the project dir by the rules of out, through the daemon's files API
// (with a bind-mounted project the files are there already).
func (a *app) copyOutputs(c *client.Client, id string, projectCopied bool, out *projectfs.Output, outputs []string) error {
	if len(outputs) == 0 || !projectCopied {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The daemon reads a stopped sandbox's files once it recorded the stop.
	if _, _, err := c.WaitState(ctx, id, client.StateStopped, client.StateFailed); err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot copy the outputs out of sandbox %s: %w", id, apiFailure(err)))
	}
	for _, rel := range outputs {
		src, err := projectfs.OutputPath(out.ProjectDir, rel)
		if err != nil {
			return exitcode.OfSandbox(err)
		}
		rc, err := c.ReadArchive(ctx, id, src)
		if err != nil {
			return withCode(ExitAirlock, fmt.Errorf("cannot copy %s out of the sandbox: %w", rel, err))
		}
		warnings, err := out.Extract(rc, rel)
		rc.Close()
		for _, w := range warnings {
			fmt.Fprintf(a.stderr, "airlock: warning: %s\n", termsafe.Line(w)) // names paths made in the sandbox
		}
		if err != nil {
			return exitcode.OfSandbox(err)
		}
	}
	return nil
}

// printBreakdown prints where a sandbox's time went, from its events on the
// daemon's clock (--log-level debug).
func (a *app) printBreakdown(ctx context.Context, c *client.Client, id string) {
	evs, _ := c.History(ctx, id, 0)
	for _, ev := range evs {
		switch ev.Kind {
		case "pool.claimed":
			fmt.Fprintf(a.stderr, "airlock: debug: warm pool: hit (parked for %s ms)\n", ev.Extra["parked_ms"])
		case "pool.missed":
			fmt.Fprintf(a.stderr, "airlock: debug: warm pool: miss (%s): a cold start\n", termsafe.Line(ev.Reason))
		}
	}
	for _, p := range client.Breakdown(evs) {
		fmt.Fprintf(a.stderr, "airlock: debug: %s: %s\n", p.Name, p.Duration.Round(time.Millisecond))
	}
}

// lostDaemon reports whether err is the control daemon going away (a broken or
// refused connection), not an answer of its.
func lostDaemon(err error) bool {
	var ce *client.Error
	return err != nil && !errors.As(err, &ce) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// daemonRetryLimit bounds how long retryDaemon keeps starting a daemon that
// went away and asking it again (each start waits up to 10 s for the daemon
// to answer, so a start begun just before the limit may end later).
const daemonRetryLimit = 10 * time.Second

// retryDaemon calls f, and while the control daemon is gone (killed, upgraded:
// a refused connection, a missing socket, a stream cut short), makes sure one
// runs again (starting it) and calls f again, with a backoff from 50 ms, for up
// to daemonRetryLimit; then it fails saying so.
func retryDaemon[T any](a *app, ctx context.Context, f func() (T, error)) (T, error) {
	b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond),
		backoff.WithMaxInterval(time.Second), backoff.WithMaxElapsedTime(daemonRetryLimit)), ctx)
	var out T
	tries := 0
	err := backoff.Retry(func() error {
		tries++
		v, err := f()
		if err == nil {
			out = v
			return nil
		}
		if !lostDaemon(err) {
			return backoff.Permanent(err)
		}
		a.daemonLost.Store(true)
		if _, derr := a.daemonClientAgain(ctx); derr != nil {
			return backoff.Permanent(derr) // it could not start: it says why
		}
		v, err = f()
		if err != nil && !lostDaemon(err) {
			return backoff.Permanent(err)
		}
		out = v
		return err
	}, b)
	if err != nil && lostDaemon(err) && ctx.Err() == nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return out, err // the daemon could not start: it says why
		}
		return out, fmt.Errorf("cannot reach the airlock daemon again: it went away and was started again, and still failed %d time(s) within %v: %w", tries, daemonRetryLimit, err)
	}
	return out, err
}

// setupDaemonFailure explains a failure to talk to the control daemon while the
// sandbox is set up: a daemon that went away is said so, not as a bare EOF.
func setupDaemonFailure(err error) error {
	if lostDaemon(err) {
		return withCode(ExitAirlock, fmt.Errorf("the airlock control daemon went away while the sandbox was being set up (%v); nothing was left behind: run it again", err))
	}
	return apiFailure(err)
}

// maxReplaced bounds how many times a run's sandbox is made again because the
// daemon went away while making it.
const maxReplaced = 5

// createRun asks for the run's sandbox (req.ID set) and returns its ID. A
// daemon that goes away meanwhile is started again (retryDaemon) and asked
// again under the same ID; one that answers the ID is taken, by a create the
// daemon that went away accepted, gets that sandbox.
func (a *app) createRun(ctx context.Context, c *client.Client, req *client.CreateRequest) (string, error) {
	lost := false
	rec, err := retryDaemon(a, ctx, func() (*client.Sandbox, error) {
		sb, err := c.Create(ctx, req)
		switch {
		case err == nil:
			return sb, nil
		case lostDaemon(err):
			lost = true
		case lost && apiReason(err) == client.ReasonIDAlreadyUsed:
			return c.Get(ctx, req.ID)
		}
		return nil, err
	})
	if err != nil {
		return "", setupDaemonFailure(err)
	}
	return rec.ID, nil
}

// awaitCreated follows sandbox *id until it is created (or fails: its
// reason, exit code). When the daemon goes away meanwhile, the one that
// answers next tells how far the making got: a sandbox with its container is
// created; one without, whose making ended with the daemon (nothing of it
// ran), is removed and made again under a new ID, which *id then holds (not
// with a caller's --id: idGiven).
func (a *app) awaitCreated(ctx context.Context, c *client.Client, req *client.CreateRequest, idGiven bool, id *string) error {
	for replaced := 0; ; replaced++ {
		ev, err := c.WaitEvent(ctx, *id, 0, "sandbox.created", "sandbox.failed")
		if err == nil {
			if ev.Kind == "sandbox.failed" {
				return failure(ev)
			}
			return nil
		}
		if !lostDaemon(err) {
			return apiFailure(err)
		}
		// The next daemon does not know what this one was asked (the
		// removal at the main command's end): the CLI removes it.
		a.daemonLost.Store(true)
		cur := *id
		sb, err := retryDaemon(a, ctx, func() (*client.Sandbox, error) { return c.Get(ctx, cur) })
		if err != nil {
			return setupDaemonFailure(err)
		}
		switch {
		case sb.State != client.StatePending || sb.Container != "":
			// Created (the event may not be recorded: its container is), or
			// ended: its history says which.
			if sb.State == client.StatePending {
				return nil
			}
			continue
		case replaced == maxReplaced:
			return withCode(ExitAirlock, fmt.Errorf("cannot make sandbox %s: the airlock daemon went away while it was being made, %d times", cur, replaced+1))
		case idGiven:
			_, _ = retryDaemon(a, ctx, func() (*client.Sandbox, error) { return c.Delete(ctx, cur) })
			return withCode(ExitAirlock, fmt.Errorf("cannot make sandbox %s: the airlock daemon went away while it was being made, and its ID (--id) is taken now: run again with another", cur))
		}
		// Its making ended with the daemon that did it: that one is removed,
		// another made (the same request, a new ID).
		if _, err := retryDaemon(a, ctx, func() (*client.Sandbox, error) { return c.Delete(ctx, cur) }); err != nil {
			return setupDaemonFailure(err)
		}
		req.ID = ids.New()
		next, err := a.createRun(ctx, c, req)
		if err != nil {
			return err
		}
		*id = next
	}
}

// mayUsePool reports whether a parked sandbox of the manifest's warm pool may
// serve this run.
func mayUsePool(r *manifest.Resolved, o runOptions) bool {
	return r.Sandbox.Pool != nil && r.Sandbox.Pool.Size > 0 && !o.noPool
}

// apiReason is the API error reason of err, "" for another error.
func apiReason(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return ""
}
