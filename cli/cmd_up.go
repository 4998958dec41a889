package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/manifest"
)

func init() { addCommand(newUpCommand) }

func newUpCommand(a *app) *cobra.Command {
	var detach bool
	sync := true
	var id string
	var lt lifetimeFlags
	cmd := &cobra.Command{
		Use:   "up [-d] [--id ID] [--timeout D] [--idle-timeout D]",
		Short: "Start the project's sandbox and open a shell in it",
		Long: "up keeps one sandbox per project: it creates it, or starts the stopped one again (its filesystem\n" +
			"changes kept) unless the manifest changed, in which case it is recreated with a notice. It waits for\n" +
			"the daemons and required services, then opens a shell (sandbox.shell, the image's SHELL, or /bin/sh).\n" +
			"When the shell exits the sandbox stops; with -d it keeps running and up prints its ID (up -d of a\n" +
			"sandbox already running prints its ID again). One up of a project runs at a time; another waits.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lt.check(); err != nil {
				return err
			}
			return a.up(detach, sync, id, &lt)
		},
	}
	lt.add(cmd.Flags())
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "leave the sandbox running without a shell and print its ID")
	cmd.Flags().StringVar(&id, "id", "", "sandbox ID for a new sandbox (default: a new UUID)")
	cmd.Flags().BoolVar(&sync, "sync", true, "while the shell runs, keep a copied project in step with this host's edits (--sync=false: the copy stays as it was made)")
	return cmd
}

func (a *app) up(detach, sync bool, id string, lt *lifetimeFlags) error {
	su, r, layers, err := a.beginWithManifest()
	defer su.close()
	if err != nil {
		return err
	}
	ctx := su.ctx
	a.warnPrivileged(r)
	if err := ctx.Err(); err != nil {
		return su.err(err)
	}
	tgt, err := a.target()
	if err != nil {
		return su.err(err)
	}
	c, err := a.daemonClient(ctx)
	if err != nil {
		return su.err(err)
	}
	// What the sandbox is made from (through a daemon on another machine,
	// the image built from the context sent instead of [sandbox.build]).
	made, err := a.prepareViaDaemon(ctx, c, r, tgt.engine)
	if err != nil {
		return su.err(err)
	}
	// One `up` of a project at a time, from the lookup until the sandbox is ready
	// or failed: a second one waits, then finds this one's sandbox.
	dir, err := a.projectDir()
	if err != nil {
		return err
	}
	lock, err := a.lockProject(ctx, dir)
	if err != nil {
		return su.err(err)
	}
	defer lock.release()
	if tgt.clientFiles {
		if err := checkClientFiles(r); err != nil {
			return err
		}
	}
	session, err := a.beginLayers(r, layers, tgt.projectCopied(r), false, "", nil)
	if err != nil {
		return su.err(err)
	}
	defer session.done()
	// A copied project is kept in step while the shell runs: the watches
	// are set before the copy is made, so that no edit falls between.
	var ps *projectSync
	if sync && !detach && tgt.projectCopied(r) && r.ProjectDir != "" {
		ps, err = newProjectSync(c, r.ProjectDir, r.ProjectDir, a.syncWarn)
		if err != nil {
			a.syncWarn("cannot keep the sandbox's copy of the project in step: %v", err)
			ps = nil
		} else {
			defer ps.stop()
		}
	}
	sbID, created, from, running, err := a.upSandbox(ctx, c, tgt, made, id, detach, lt)
	if err == nil && !created {
		// A sandbox that was there: the lifetime asked for replaces its own.
		if aerr := lt.apply(ctx, c, sbID); aerr != nil {
			return su.err(aerr)
		}
	}
	if !running {
		session.started(sbID)
	}
	if running {
		// up -d of a sandbox that already runs, as the manifest now says: it is
		// left as it is and its ID printed (docker compose up -d does the same).
		lock.release()
		su.close()
		if !a.opts.quiet {
			fmt.Fprintf(a.stderr, "airlock: sandbox %s is already running for %s\n", sbID, dir)
		}
		fmt.Fprintln(a.stdout, sbID)
		return nil
	}
	if err == nil {
		err = a.awaitUpReady(ctx, c, sbID, from, created)
	}
	if su.interrupted() == nil {
		// Ready or failed (and stopped): the next `up` may look.
		lock.release()
	}
	if interrupted := su.interrupted(); interrupted != nil {
		a.abandonUp(c, sbID, created)
		return interruptedDuringSetup(interrupted)
	}
	if err != nil {
		return err
	}
	su.close()
	if detach {
		fmt.Fprintln(a.stdout, sbID)
		return nil
	}
	if ps != nil {
		// A sandbox started again has its last session's copy: all of the
		// project is sent once.
		ps.start(sbID, !created)
		if !a.opts.quiet {
			fmt.Fprintln(a.stderr, syncNotice(r.ProjectDir, r.ProjectDir))
		}
	}
	return a.upShell(c, sbID, r, session, ps)
}

// syncWarn says what the sync of up's project could not do (a line of its
// own under a terminal in raw mode too).
func (a *app) syncWarn(format string, args ...any) {
	end := "\n"
	if isTerminal(a.stderr) {
		end = "\r\n"
	}
	fmt.Fprintf(a.stderr, "airlock: "+format+end, args...)
}

// awaitUpReady waits for the sandbox up started to be ready; one that failed or
// stopped first is stopped, and removed when nothing of it ran (a taken host
// port, a container that died before its supervisor reported).
func (a *app) awaitUpReady(ctx context.Context, c *client.Client, sbID string, from uint64, created bool) error {
	qctx, qcancel := context.WithCancel(ctx)
	a.sayQueued(qctx, c, sbID, from)
	ev, err := c.WaitEvent(ctx, sbID, from, "sandbox.ready", "sandbox.failed", "sandbox.stopped")
	qcancel()
	switch {
	case err != nil:
		err = apiFailure(err)
	case ev.Kind == "sandbox.failed":
		err = failure(ev)
	case ev.Kind == "sandbox.stopped":
		err = withCode(ExitAirlock, fmt.Errorf("sandbox %s stopped before it was ready: %s", sbID, ev.Reason))
	}
	if err != nil {
		bg := context.Background()
		if cur, gerr := c.Get(bg, sbID); gerr == nil && (cur.State == client.StateReady || cur.State == client.StatePending) {
			_ = stopSandbox(bg, c, *cur)
		}
		if created && (ev.Extra["port_in_use"] != "" || ev.Extra["exited_early"] != "") {
			// A host port of sandbox.ports is taken, or the container died
			// before its supervisor reported anything (it could not run):
			// nothing of the new sandbox ran, so nothing of it is left.
			if _, derr := c.Delete(bg, sbID); derr == nil {
				_, _, _ = c.WaitState(bg, sbID, client.StateDeleted)
			}
		}
	}
	return err
}

// abandonUp stops (and removes, if this up created it) the sandbox of an up
// interrupted in its setup.
func (a *app) abandonUp(c *client.Client, sbID string, created bool) {
	bg := context.Background()
	if sbID == "" {
		return
	}
	if cur, gerr := c.Get(bg, sbID); gerr == nil {
		_ = stopSandbox(bg, c, *cur)
	}
	if created {
		_, _ = c.Delete(bg, sbID)
		_, _, _ = c.WaitState(bg, sbID, client.StateDeleted)
	}
}

// upShell runs the interactive shell of up in the ready sandbox, then stops
// the sandbox (its shutdown lines relayed) and ends the trust session.
func (a *app) upShell(c *client.Client, sbID string, r *manifest.Resolved, session *layerSession, ps *projectSync) error {
	tty := isTerminal(a.stdin) && isTerminal(a.stdout)
	code, err := a.execAttached(context.Background(), c, sbID, &client.ExecRequest{Shell: true, TTY: tty}, tty || forwardsStdin(a.stdin))
	if ps != nil {
		ps.stop()
	}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer stopCancel()
	var shutdownLines <-chan struct{}
	if !a.opts.quiet {
		shutdownLines = a.followShutdownLines(stopCtx, c, sbID)
	}
	stopped := false
	if cur, gerr := c.Get(stopCtx, sbID); gerr == nil {
		serr := stopSandbox(stopCtx, c, *cur)
		if serr != nil && err == nil {
			err = serr
		}
		stopped = serr == nil
	}
	session.ended(stopped, time.Time{})
	if shutdownLines != nil {
		select {
		case <-shutdownLines:
		case <-time.After(2 * time.Second):
		}
	}
	if manifest.HasEgress(r) {
		a.egressSummary(context.Background(), c, sbID)
	}
	if err != nil {
		return err
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}

// upSandbox asks the daemon for the project's sandbox: the stopped one started
// again, or a new one (replacing a stopped one whose plan changed). A running one
// is refused, except by up -d (detach) when it runs on this Engine with the
// manifest as it is now: then running is true and sbID is its ID. The caller holds
// the project's lock.
func (a *app) upSandbox(ctx context.Context, c *client.Client, tgt *target, r *manifest.Resolved, id string, detach bool, lt *lifetimeFlags) (sbID string, created bool, from uint64, running bool, err error) {
	wm, secretValues, werr := wireManifest(r)
	if werr != nil {
		return "", false, 0, false, werr
	}
	existing, err := a.projectSandbox(ctx, c)
	if err != nil {
		return "", false, 0, false, err
	}
	if existing != nil {
		if existing.State == client.StatePaused {
			return "", false, 0, false, withCode(ExitFailure, fmt.Errorf("sandbox %s of %s is paused: let it go on with `airlock unpause %s` (or stop it with `airlock stop`)", existing.ID, existing.Project, existing.ID))
		}
		live := existing.State == client.StateReady || existing.State == client.StatePending
		if live && !detach {
			return "", false, 0, false, withCode(ExitFailure, fmt.Errorf("sandbox %s is already running for %s; run commands in it with `airlock exec -- CMD` (or stop it with `airlock stop`)", existing.ID, existing.Project))
		}
		if id != "" && id != existing.ID {
			return "", false, 0, false, withCode(ExitUsage, fmt.Errorf("the project already has sandbox %s; remove it (airlock rm) to use --id %s", existing.ID, id))
		}
		cmp, err := c.Compare(ctx, existing.ID, &client.CompareRequest{Manifest: wm, Secrets: secretValues, Engine: tgt.engine})
		if err != nil {
			return "", false, 0, false, apiFailure(err)
		}
		if live {
			if !cmp.Same {
				return "", false, 0, false, withCode(ExitFailure, fmt.Errorf("sandbox %s is already running for %s, made from another manifest or on another Docker Engine; stop it (airlock stop) and run `airlock up -d` again to recreate it, or run commands in it as it is with `airlock exec -- CMD`", existing.ID, existing.Project))
			}
			if existing.State == client.StatePending {
				// Left starting by an `up` that ended early: wait for it as ours.
				return existing.ID, false, existing.LastSeq, false, nil
			}
			return existing.ID, false, 0, true, nil
		}
		if cmp.Same {
			if _, err := c.Resume(ctx, existing.ID, &client.ResumeRequest{Secrets: secretValues}); err != nil {
				return "", false, 0, false, apiFailure(err)
			}
			return existing.ID, false, existing.LastSeq, false, nil
		}
		if !a.opts.quiet {
			why := "the manifest changed since sandbox %s was created"
			switch {
			case !cmp.Found && existing.Engine != nil && tgt.engine != nil && engineHost(existing.Engine) != engineHost(tgt.engine):
				why = "sandbox %s is on another Docker Engine (" + engineName(existing.Engine) + ") than " + endpointOf(tgt.engine).String()
			case !cmp.Found && tgt.kube:
				why = "sandbox %s is gone from the cluster (on the kubernetes backend, stop deletes its Pod)"
			}
			fmt.Fprintf(a.stderr, "airlock: "+why+"; recreating it (changes to its filesystem are lost)\n", existing.ID)
		}
		if _, err := c.Delete(ctx, existing.ID); err != nil {
			return "", false, 0, false, apiFailure(err)
		}
		if _, _, err := c.WaitState(ctx, existing.ID, client.StateDeleted); err != nil {
			return "", false, 0, false, apiFailure(err)
		}
	}
	rec, err := c.Create(ctx, &client.CreateRequest{ID: id, Kind: client.KindUp, Manifest: wm, Secrets: secretValues, ToolEnv: a.toolEnv(),
		Start: !tgt.clientFiles, Engine: tgt.engine, ClientFiles: tgt.clientFiles, LifetimeRequest: lt.request()})
	if err != nil {
		return "", false, 0, false, apiFailure(err)
	}
	if tgt.clientFiles {
		// This machine's files are written in, then it starts; a failure
		// leaves nothing behind.
		err := func() error {
			if _, err := waitCreated(ctx, c, rec.ID); err != nil {
				return err
			}
			if err := a.uploadFiles(ctx, c, rec.ID, r, tgt.projectCopied(r)); err != nil {
				return err
			}
			if _, err := c.Resume(ctx, rec.ID, &client.ResumeRequest{Secrets: secretValues}); err != nil {
				return apiFailure(err)
			}
			return nil
		}()
		if err != nil {
			bg := context.WithoutCancel(ctx)
			if _, derr := c.Delete(bg, rec.ID); derr == nil {
				_, _, _ = c.WaitState(bg, rec.ID, client.StateDeleted)
			}
			return "", false, 0, false, err
		}
	}
	return rec.ID, true, 0, false, nil
}
