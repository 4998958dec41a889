package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
)

func init() {
	addCommand(newPauseCommand)
	addCommand(newUnpauseCommand)
}

func newPauseCommand(a *app) *cobra.Command {
	var labels []string
	cmd := &cobra.Command{
		Use:   "pause [SANDBOX]",
		Short: "Freeze this project's sandbox, a named one, or every one matching --label, with its memory kept",
		Long: "pause freezes a ready sandbox in place: its supervisor, daemons and execs and its services' containers stop being\n" +
			"scheduled (the Engine's container pause), their memory kept. `airlock unpause` lets each go on where it was.\n" +
			"While paused, exec is refused; stop and rm work. Its timeout and idle timeout still run. Not on Kubernetes.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.eachTarget(args, labels, func(ctx context.Context, c *client.Client, s client.Sandbox) error {
				return a.freeze(ctx, c, s, true)
			})
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "every sandbox with label KEY=VALUE (repeatable, all must match)")
	return cmd
}

func newUnpauseCommand(a *app) *cobra.Command {
	var labels []string
	cmd := &cobra.Command{
		Use:     "unpause [SANDBOX]",
		Aliases: []string{"resume"},
		Short:   "Let a paused sandbox go on where it was (this project's, a named one, or every one matching --label)",
		Long: "unpause thaws a sandbox `airlock pause` froze: every process goes on where it was, with the same PIDs and memory.\n" +
			"`airlock resume` is the same command. (A stopped sandbox is started again by `airlock up`.)",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.eachTarget(args, labels, func(ctx context.Context, c *client.Client, s client.Sandbox) error {
				return a.freeze(ctx, c, s, false)
			})
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "every sandbox with label KEY=VALUE (repeatable, all must match)")
	return cmd
}

// freeze pauses (pause) or unpauses sandbox s and says so.
func (a *app) freeze(ctx context.Context, c *client.Client, s client.Sandbox, pause bool) error {
	call, done := c.Unpause, "unpaused"
	if pause {
		call, done = c.Pause, "paused"
	}
	if _, err := call(ctx, s.ID); err != nil {
		return apiFailure(err)
	}
	if !a.opts.quiet {
		fmt.Fprintf(a.stdout, "%s %s\n", done, s.ID)
	}
	return nil
}
