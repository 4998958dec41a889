package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/termsafe"
)

func init() { addCommand(newStopCommand) }

func newStopCommand(a *app) *cobra.Command {
	var labels []string
	cmd := &cobra.Command{
		Use:   "stop [SANDBOX]",
		Short: "Stop this project's sandbox, a named one, or every one matching --label",
		Long:  "stop stops the sandbox: its supervisor shuts the daemons down (each with its signal and timeout),\nthen its services stop. Its filesystem is kept; `airlock up` starts it again.",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.eachTarget(args, labels, func(ctx context.Context, c *client.Client, s client.Sandbox) error {
				if err := a.stopShowingLines(ctx, c, s); err != nil {
					return err
				}
				if !a.opts.quiet {
					fmt.Fprintf(a.stdout, "stopped %s\n", s.ID)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "every sandbox with label KEY=VALUE (repeatable, all must match)")
	return cmd
}

// stopSandbox asks the daemon to stop a sandbox and waits until it is stopped.
func stopSandbox(ctx context.Context, c *client.Client, s client.Sandbox) error {
	if s.State != client.StateReady && s.State != client.StatePending && s.State != client.StatePaused {
		return nil
	}
	if _, err := c.Stop(ctx, s.ID); err != nil {
		return apiFailure(err)
	}
	if _, _, err := c.WaitState(ctx, s.ID, client.StateStopped, client.StateFailed, client.StateDeleted); err != nil {
		return apiFailure(err)
	}
	return nil
}

// followShutdownLines shows on stderr the sandbox's primary's stderr from now
// until it stops (its supervisor's shutdown lines), attached through the
// daemon; the channel is closed at the end (at once when it cannot attach).
// Written inside the sandbox: control characters shown, not obeyed.
func (a *app) followShutdownLines(ctx context.Context, c *client.Client, id string) <-chan struct{} {
	done := make(chan struct{})
	s, err := c.AttachMain(ctx, id, &client.AttachRequest{}, nil, io.Discard, termsafe.NewWriter(a.stderr))
	if err != nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		select {
		case <-s.Done():
		case <-ctx.Done():
		}
		s.Close()
	}()
	return done
}

// stopShowingLines stops a sandbox as stopSandbox does and, unless --quiet, shows
// its supervisor's shutdown lines on stderr (✔ daemon web: shut down, ✘ daemon
// flaky: gave up after 3 launches (exit 3)), as `airlock up` does when its shell
// exits: the primary's stderr from the moment of the stop until it stopped.
func (a *app) stopShowingLines(ctx context.Context, c *client.Client, s client.Sandbox) (err error) {
	if s.State == client.StateReady || s.State == client.StatePending || s.State == client.StatePaused {
		defer func() {
			if err == nil {
				a.layersAfterStop(s.ID) // what it changed in the layers is flagged now
			}
		}()
	}
	// A paused sandbox takes no attach: the daemon thaws it as it stops it.
	if a.opts.quiet || (s.State != client.StateReady && s.State != client.StatePending) {
		return stopSandbox(ctx, c, s)
	}
	followCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	lines := a.followShutdownLines(followCtx, c, s.ID)
	err = stopSandbox(ctx, c, s)
	// The follow ends when the primary stops; the stop returned by then.
	select {
	case <-lines:
	case <-time.After(2 * time.Second):
	}
	return err
}
