package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/sandbox"
)

func init() { addCommand(newUpCommand) }

func newUpCommand(a *app) *cobra.Command {
	var detach bool
	var id string
	cmd := &cobra.Command{
		Use:   "up [-d] [--id ID]",
		Short: "Start the project's sandbox and open a shell in it",
		Long: "up keeps one sandbox per project: it creates it, or starts the stopped one again (its filesystem\n" +
			"changes kept) unless the manifest changed, in which case it is recreated with a notice. It waits for\n" +
			"the daemons and required services, then opens a shell (sandbox.shell, the image's SHELL, or /bin/sh).\n" +
			"When the shell exits the sandbox stops; with -d it keeps running and up prints its ID.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.up(detach, id)
		},
	}
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "leave the sandbox running without a shell and print its ID")
	cmd.Flags().StringVar(&id, "id", "", "sandbox ID for a new sandbox (default: a new UUID)")
	return cmd
}

func (a *app) up(detach bool, id string) error {
	r, err := a.loadManifest()
	if err != nil {
		return err
	}
	a.warnPrivileged(r)
	su := newSetup(context.Background())
	defer su.close()
	ctx := su.ctx
	rt, closeRT, err := a.runtime(ctx)
	if err != nil {
		return err
	}
	defer closeRT()
	c, err := a.daemonClient(ctx)
	if err != nil {
		return err
	}
	if err := rt.Prepare(ctx, r); err != nil {
		return su.err(sandboxError(err))
	}
	sbID, created, from, err := a.upSandbox(ctx, c, rt, r, id)
	if err == nil {
		var ev client.Event
		ev, err = c.WaitEvent(ctx, sbID, from, "sandbox.ready", "sandbox.failed", "sandbox.stopped")
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
		}
	}
	if interrupted := su.interrupted(); interrupted != nil {
		bg := context.Background()
		if sbID != "" {
			if cur, gerr := c.Get(bg, sbID); gerr == nil {
				_ = stopSandbox(bg, c, *cur)
			}
			if created {
				_, _ = c.Delete(bg, sbID)
				_, _, _ = c.WaitState(bg, sbID, client.StateDeleted)
			}
		}
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
	sb, err := rt.Open(context.Background(), sbID, r)
	if err != nil {
		return sandboxError(err)
	}
	tty := isTerminal(a.stdin) && isTerminal(a.stdout)
	code, err := a.execRecorded(context.Background(), c, rt, sb, sandbox.ExecRequest{
		Cmd: rt.Shell(context.Background(), sb), TTY: tty, Stdin: tty || forwardsStdin(a.stdin),
	})
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer stopCancel()
	var shutdownLines <-chan error
	if !a.opts.quiet {
		// Show the supervisor's shutdown lines (✔ daemon web: shut down).
		shutdownLines = rt.FollowStderr(stopCtx, sb, time.Now(), a.stderr)
	}
	if cur, gerr := c.Get(stopCtx, sbID); gerr == nil {
		if serr := stopSandbox(stopCtx, c, *cur); serr != nil && err == nil {
			err = serr
		}
	}
	if shutdownLines != nil {
		select {
		case <-shutdownLines:
		case <-time.After(2 * time.Second):
		}
	}
	if sandbox.HasEgress(r) {
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
// is refused.
func (a *app) upSandbox(ctx context.Context, c *client.Client, rt *sandbox.Runtime, r *manifest.Resolved, id string) (sbID string, created bool, from uint64, err error) {
	wm, secretValues, werr := wireManifest(r)
	if werr != nil {
		return "", false, 0, werr
	}
	existing, err := a.projectSandbox(ctx, c)
	if err != nil {
		return "", false, 0, err
	}
	if existing != nil {
		if existing.State == client.StateReady || existing.State == client.StatePending {
			return "", false, 0, withCode(ExitFailure, fmt.Errorf("sandbox %s is already running for %s; run commands in it with `airlock exec -- CMD` (or stop it with `airlock stop`)", existing.ID, existing.Project))
		}
		if id != "" && id != existing.ID {
			return "", false, 0, withCode(ExitUsage, fmt.Errorf("the project already has sandbox %s; remove it (airlock rm) to use --id %s", existing.ID, id))
		}
		hash, err := rt.PlanHashFor(ctx, r)
		if err != nil {
			return "", false, 0, sandboxError(err)
		}
		info, ierr := rt.Get(ctx, existing.ID)
		if ierr == nil && hash == info.PlanHash {
			if _, err := c.Resume(ctx, existing.ID, &client.ResumeRequest{Secrets: secretValues}); err != nil {
				return "", false, 0, apiFailure(err)
			}
			return existing.ID, false, existing.LastSeq, nil
		}
		if !a.opts.quiet {
			why := "the manifest changed since sandbox %s was created"
			if ierr != nil && existing.Engine != nil && existing.Engine.Host != rt.Endpoint.Host {
				why = "sandbox %s is on another Docker Engine (" + engineName(existing.Engine) + ") than " + rt.EngineName
			}
			fmt.Fprintf(a.stderr, "airlock: "+why+"; recreating it (changes to its filesystem are lost)\n", existing.ID)
		}
		if _, err := c.Delete(ctx, existing.ID); err != nil {
			return "", false, 0, apiFailure(err)
		}
		if _, _, err := c.WaitState(ctx, existing.ID, client.StateDeleted); err != nil {
			return "", false, 0, apiFailure(err)
		}
	}
	rec, err := c.Create(ctx, &client.CreateRequest{ID: id, Kind: sandbox.KindUp, Manifest: wm, Secrets: secretValues, Start: true, Engine: wireEngine(rt)})
	if err != nil {
		return "", false, 0, apiFailure(err)
	}
	return rec.ID, true, 0, nil
}
