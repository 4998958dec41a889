package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { addCommand(newValidateCommand) }

func newValidateCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Check the manifest: exit 0, or print the config errors and exit 2",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.loadManifest()
			if err != nil {
				return err
			}
			a.warnPrivileged(r)
			if !a.opts.quiet {
				fmt.Fprintf(a.stdout, "%s: valid (%d layers, %d daemons, %d services)\n", displayPath(r.File), len(r.Layers), len(r.Daemons), len(r.Services))
			}
			return nil
		},
	}
}
