package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/exitcode"
	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/internal/proc"
	"github.com/airlock-dev/airlock/internal/termsafe"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
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
	a.steps.mark("prepare")
	rec, taken, err := a.createRun(su.ctx, j.c, j.req)
	if err != nil {
		return su.err(err)
	}
	j.id = rec.ID
	a.steps.mark("create")
	defer j.finish()
	qctx, qcancel := context.WithCancel(su.ctx)
	defer qcancel()
	a.sayQueued(qctx, j.c, j.id, 0)
	// j.id may change here: a sandbox whose making a daemon that went away cut
	// short is replaced (the deferred removal follows j.id).
	if j.createdSeq, err = a.awaitCreated(su.ctx, j.c, j.req, rec, taken, o.id != "", &j.id); err != nil {
		return su.err(err)
	}
	a.steps.mark("created")
	waitCtx, waitCancel := context.WithCancel(context.WithoutCancel(parent))
	defer waitCancel()
	defer func() { j.restore() }()
	if err := j.start(waitCtx); err != nil {
		j.restore()
		return err
	}
	a.steps.mark("started")
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

// daemonRetryLimit bounds how long retryDaemon keeps starting a daemon that
// went away and asking it again (each start waits up to 10 s for the daemon
// to answer, so a start begun just before the limit may end later).
const daemonRetryLimit = 10 * time.Second

// maxReplaced bounds how many times a run's sandbox is made again because the
// daemon went away while making it.
const maxReplaced = 5

// createRun asks for the run's sandbox (req.ID set) and returns its record. A
// daemon that goes away meanwhile is started again (retryDaemon) and asked
// again under the same ID; one that answers the ID is taken, by a create the
// daemon that went away accepted, gets that sandbox: taken says so (its
// making may have ended with that daemon: awaitCreated).
func (a *app) createRun(ctx context.Context, c *client.Client, req *client.CreateRequest) (rec *client.Sandbox, taken bool, err error) {
	lost := false
	rec, err = retryDaemon(a, ctx, func() (*client.Sandbox, error) {
		sb, err := c.Create(ctx, req)
		switch {
		case err == nil:
			return sb, nil
		case lostDaemon(err):
			lost = true
		case lost && apiReason(err) == client.ReasonIDAlreadyUsed:
			taken = true
			return c.Get(ctx, req.ID)
		}
		return nil, err
	})
	if err != nil {
		return nil, false, setupDaemonFailure(err)
	}
	return rec, taken, nil
}

// awaitCreated follows sandbox *id, as the create answered it (rec), until it
// is created (or fails: its reason, exit code), and returns the sequence of an
// event recorded once it was: what follows is the start's. A parked sandbox
// of a warm pool is created when the create answers (its container known).
// When the daemon goes away meanwhile, or went away before it answered the
// create (taken: the record came from the next one), the one that answers
// tells how far the making got: a sandbox with its container is created; one
// without, whose making ended with the daemon (nothing of it ran, and nothing
// makes it any more), is removed and made again under a new ID, which *id
// then holds (not with a caller's --id: idGiven).
func (a *app) awaitCreated(ctx context.Context, c *client.Client, req *client.CreateRequest, rec *client.Sandbox, taken, idGiven bool, id *string) (uint64, error) {
	for replaced := 0; ; replaced++ {
		if rec.State == client.StatePending && rec.Container != "" {
			return rec.LastSeq, nil
		}
		if !taken {
			ev, err := c.WaitEvent(ctx, *id, 0, "sandbox.created", "sandbox.failed")
			if err == nil {
				if ev.Kind == "sandbox.failed" {
					return 0, failure(ev)
				}
				return ev.Sequence, nil
			}
			if !lostDaemon(err) {
				return 0, apiFailure(err)
			}
		}
		// The next daemon does not know what this one was asked (the
		// removal at the main command's end): the CLI removes it.
		a.daemonLost.Store(true)
		cur := *id
		sb, err := retryDaemon(a, ctx, func() (*client.Sandbox, error) { return c.Get(ctx, cur) })
		if err != nil {
			return 0, setupDaemonFailure(err)
		}
		taken = false // judged from this record; its events say the rest
		switch {
		case sb.State != client.StatePending || sb.Container != "":
			// Created (the event may not be recorded: its container is), or
			// ended: its history says which.
			if sb.State == client.StatePending {
				return sb.LastSeq, nil
			}
			continue
		case replaced == maxReplaced:
			return 0, withCode(ExitAirlock, fmt.Errorf("cannot make sandbox %s: the airlock daemon went away while it was being made, %d times", cur, replaced+1))
		case idGiven:
			_, _ = retryDaemon(a, ctx, func() (*client.Sandbox, error) { return c.Delete(ctx, cur) })
			return 0, withCode(ExitAirlock, fmt.Errorf("cannot make sandbox %s: the airlock daemon went away while it was being made, and its ID (--id) is taken now: run again with another", cur))
		}
		// Its making ended with the daemon that did it: that one is removed,
		// another made (the same request, a new ID).
		if _, err := retryDaemon(a, ctx, func() (*client.Sandbox, error) { return c.Delete(ctx, cur) }); err != nil {
			return 0, setupDaemonFailure(err)
		}
		req.ID = ids.New()
		if rec, taken, err = a.createRun(ctx, c, req); err != nil {
			return 0, err
		}
		*id = rec.ID
	}
}

// mayUsePool reports whether a parked sandbox of the manifest's warm pool may
// serve this run.
func mayUsePool(r *manifest.Resolved, o runOptions) bool {
	return r.Sandbox.Pool != nil && r.Sandbox.Pool.Size > 0 && !o.noPool
}
