package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
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
			ctx := context.Background()
			rt, closeRT, err := a.runtime(ctx)
			if err != nil {
				return err
			}
			defer closeRT()
			list, err := a.targets(ctx, rt, args, labels)
			if err != nil {
				return err
			}
			for _, s := range list {
				if err := rt.Stop(ctx, s.ID); err != nil {
					return sandboxError(err)
				}
				if !a.opts.quiet {
					fmt.Fprintf(a.stdout, "stopped %s\n", s.ID)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "every sandbox with label KEY=VALUE (repeatable, all must match)")
	return cmd
}
