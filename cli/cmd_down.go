package cli

import "github.com/spf13/cobra"

func init() { addCommand(newDownCommand) }

func newDownCommand(a *app) *cobra.Command {
	var labels []string
	cmd := &cobra.Command{
		Use:   "down [SANDBOX]",
		Short: "Stop and remove this project's sandbox, a named one, or every one matching --label",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.remove(args, labels, true, true)
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "every sandbox with label KEY=VALUE (repeatable, all must match)")
	return cmd
}
