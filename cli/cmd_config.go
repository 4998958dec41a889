package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func init() { addCommand(newConfigCommand) }

func newConfigCommand(a *app) *cobra.Command {
	var asJSON, layers bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the fully resolved manifest (secret values masked)",
		Long: "Print the manifest after presets, sandbox.toml and sandbox.local.toml are merged, defaults applied\n" +
			"and ${VAR} references substituted. Values from the vault are shown as ********.\n" +
			"--layers shows, for every value, the layer (file and line) or default that set it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := a.backend()
			if err != nil {
				return err
			}
			r, err := a.loadManifest()
			if err != nil {
				return err
			}
			if err := a.checkBackend(r, b); err != nil {
				return err
			}
			a.warnPrivileged(r)
			switch {
			case layers && asJSON:
				b, err := json.MarshalIndent(r.Settings(), "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, string(b))
			case layers:
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				for _, s := range r.Settings() {
					fmt.Fprintf(tw, "%s = %s\t# %s\n", s.Key, s.Value, s.Layer)
				}
				return tw.Flush()
			case asJSON:
				b, err := r.JSON()
				if err != nil {
					return err
				}
				_, err = a.stdout.Write(b)
				return err
			default:
				b, err := r.TOML()
				if err != nil {
					return err
				}
				_, err = a.stdout.Write(b)
				return err
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (with the TOML key names)")
	cmd.Flags().BoolVar(&layers, "layers", false, "show which layer set each value")
	return cmd
}
