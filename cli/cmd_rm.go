package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

func init() { addCommand(newRmCommand) }

func newRmCommand(a *app) *cobra.Command {
	var labels []string
	var force bool
	cmd := &cobra.Command{
		Use:   "rm [-f] [SANDBOX]",
		Short: "Remove this project's sandbox, a named one, or every one matching --label",
		Long:  "rm removes everything of a sandbox: containers, network and state dir. A running sandbox is\nrefused unless -f, which stops it first.",
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
		if s.State == "running" {
			if !force && !stop {
				return withCode(ExitFailure, fmt.Errorf("sandbox %s is running: stop it first (airlock stop %s) or use rm -f", s.ID, s.ID))
			}
			if err := rt.Stop(ctx, s.ID); err != nil {
				return sandboxError(err)
			}
		}
		if err := rt.Remove(ctx, s.ID); err != nil {
			return sandboxError(err)
		}
		if !a.opts.quiet {
			fmt.Fprintf(a.stdout, "removed %s\n", s.ID)
		}
	}
	return nil
}
