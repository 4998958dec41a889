package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
)

func init() { addCommand(newRmCommand) }

func newRmCommand(a *app) *cobra.Command {
	var labels []string
	var force bool
	cmd := &cobra.Command{
		Use:   "rm [-f] [SANDBOX]",
		Short: "Remove this project's sandbox, a named one, or every one matching --label",
		Long:  "rm removes everything of a sandbox: its containers (with the logs and status kept in them) and network. A running sandbox is\nrefused unless -f, which stops it first. The sandbox's ID stays reserved.",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.remove(args, labels, force, false)
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "stop a running sandbox first")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "every sandbox with label KEY=VALUE (repeatable, all must match)")
	return cmd
}

// remove is rm, and down when stop is set.
func (a *app) remove(args, labels []string, force, stop bool) error {
	return a.eachTarget(args, labels, func(ctx context.Context, c *client.Client, s client.Sandbox) error {
		if s.State == client.StatePaused && !force && !stop {
			return withCode(ExitFailure, fmt.Errorf("sandbox %s is paused: stop it first (airlock stop %s) or use rm -f", s.ID, s.ID))
		}
		if (s.State == client.StateReady || s.State == client.StatePending) && !force && !stop {
			return withCode(ExitFailure, fmt.Errorf("sandbox %s is running: stop it first (airlock stop %s) or use rm -f", s.ID, s.ID))
		}
		if _, err := c.Delete(ctx, s.ID); err != nil {
			return apiFailure(err)
		}
		if _, _, err := c.WaitState(ctx, s.ID, client.StateDeleted); err != nil {
			return apiFailure(err)
		}
		if !a.opts.quiet {
			fmt.Fprintf(a.stdout, "removed %s\n", s.ID)
		}
		return nil
	})
}

// eachTarget calls f for each sandbox args or labels select (design.md §9: this
// project's, a named one, or every one with the labels), stopping at an error.
func (a *app) eachTarget(args, labels []string, f func(ctx context.Context, c *client.Client, s client.Sandbox) error) error {
	ctx := context.Background()
	c, err := a.daemonClient(ctx)
	if err != nil {
		return err
	}
	list, err := a.targets(ctx, c, args, labels)
	if err != nil {
		return err
	}
	for _, s := range list {
		if err := f(ctx, c, s); err != nil {
			return err
		}
	}
	return nil
}
