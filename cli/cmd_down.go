package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
)

func init() { addCommand(newDownCommand) }

func newDownCommand(a *app) *cobra.Command {
	var labels []string
	cmd := &cobra.Command{
		Use:   "down [SANDBOX]",
		Short: "Stop and remove this project's sandbox, a named one, or every one matching --label",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !a.opts.quiet {
				// Stop the running ones first, showing their shutdown lines as
				// stop does; remove then finds them stopped.
				if err := a.stopTargetsShowingLines(args, labels); err != nil {
					return err
				}
			}
			return a.remove(args, labels, true, true)
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "every sandbox with label KEY=VALUE (repeatable, all must match)")
	return cmd
}

// stopTargetsShowingLines stops the running sandboxes among the targets, each
// with its supervisor's shutdown lines.
func (a *app) stopTargetsShowingLines(args, labels []string) error {
	return a.eachTarget(args, labels, func(ctx context.Context, c *client.Client, s client.Sandbox) error {
		if s.State == client.StateReady || s.State == client.StatePending || s.State == client.StatePaused {
			return a.stopShowingLines(ctx, c, s)
		}
		return nil
	})
}
