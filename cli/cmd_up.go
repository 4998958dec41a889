package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"

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
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var interrupted os.Signal
	setupDone := make(chan struct{})
	defer func() {
		select {
		case <-setupDone:
		default:
			close(setupDone)
		}
	}()
	go func() {
		select {
		case s := <-sigs:
			interrupted = s
			cancel()
		case <-setupDone:
		}
	}()
	rt, closeRT, err := a.runtime(ctx)
	if err != nil {
		return err
	}
	defer closeRT()

	sb, created, err := a.upSandbox(ctx, rt, r, id)
	if err != nil {
		if interrupted != nil {
			return interruptedDuringSetup(interrupted)
		}
		return sandboxError(err)
	}
	started := time.Now()
	if err := rt.Start(ctx, sb); err == nil {
		err = rt.WaitReady(ctx, sb, started)
		if err != nil {
			_ = rt.Stop(context.WithoutCancel(ctx), sb.ID)
		}
		if err != nil && interrupted == nil {
			return sandboxError(err)
		}
	} else if interrupted == nil {
		if created {
			_ = rt.Remove(context.WithoutCancel(ctx), sb.ID)
		}
		return sandboxError(err)
	}
	if interrupted != nil {
		_ = rt.Stop(context.WithoutCancel(ctx), sb.ID)
		if created {
			_ = rt.Remove(context.WithoutCancel(ctx), sb.ID)
		}
		return interruptedDuringSetup(interrupted)
	}
	close(setupDone)
	signal.Stop(sigs)
	if detach {
		fmt.Fprintln(a.stdout, sb.ID)
		return nil
	}
	tty := isTerminal(a.stdin) && isTerminal(a.stdout)
	code, err := a.execInteractive(context.Background(), rt, sb, sandbox.ExecRequest{
		Cmd: rt.Shell(ctx, sb), TTY: tty, Stdin: tty || forwardsStdin(a.stdin),
	})
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer stopCancel()
	if serr := rt.Stop(stopCtx, sb.ID); serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		return sandboxError(err)
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}

// upSandbox returns the project's sandbox ready to start: the stopped one, or a new
// one (replacing a stopped one whose plan changed). A running one is refused.
func (a *app) upSandbox(ctx context.Context, rt *sandbox.Runtime, r *manifest.Resolved, id string) (*sandbox.Sandbox, bool, error) {
	existing, err := a.projectSandbox(ctx, rt)
	if err != nil {
		return nil, false, err
	}
	if existing != nil {
		if existing.State == "running" {
			return nil, false, withCode(ExitFailure, fmt.Errorf("sandbox %s is already running for %s; run commands in it with `airlock exec -- CMD` (or stop it with `airlock stop`)", existing.ID, existing.Project))
		}
		if id != "" && id != existing.ID {
			return nil, false, withCode(ExitUsage, fmt.Errorf("the project already has sandbox %s; remove it (airlock rm) to use --id %s", existing.ID, id))
		}
		hash, err := rt.PlanHashFor(ctx, r)
		if err != nil {
			return nil, false, err
		}
		if hash == existing.PlanHash {
			sb, err := rt.Open(ctx, existing.ID, r)
			return sb, false, err
		}
		if !a.opts.quiet {
			fmt.Fprintf(a.stderr, "airlock: the manifest changed since sandbox %s was created; recreating it (changes to its filesystem are lost)\n", existing.ID)
		}
		if err := rt.Remove(ctx, existing.ID); err != nil {
			return nil, false, err
		}
	}
	sb, err := rt.Create(ctx, &sandbox.Request{ID: id, Manifest: r, Kind: sandbox.KindUp})
	return sb, true, err
}
