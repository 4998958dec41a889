package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { addCommand(newVersionCommand) }

func newVersionCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print airlock's version and build ID",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(a.stdout, "airlock %s (build %s)\n", Version, BuildID)
			return nil
		},
	}
}
