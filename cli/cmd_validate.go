package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { addCommand(newValidateCommand) }

func newValidateCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Check the manifest (for the chosen backend): exit 0, or print the config errors and exit 2",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, b, err := a.manifestFor()
			if err != nil {
				return err
			}
			if !a.opts.quiet {
				on := ""
				if b.Kube() {
					on = " for the kubernetes backend"
				}
				fmt.Fprintf(a.stdout, "%s: valid%s (%d layers, %d daemons, %d services)\n", displayPath(r.File), on, len(r.Layers), len(r.Daemons), len(r.Services))
			}
			return nil
		},
	}
}
