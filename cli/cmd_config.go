package cli

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/manifest"
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
			r, _, err := a.manifestFor()
			if err != nil {
				return err
			}
			switch {
			case layers && asJSON:
				return a.printJSON(r.Settings())
			case layers:
				return printLayers(a.stdout, r.Settings())
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
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (with the TOML key names)")
	cmd.Flags().BoolVar(&layers, "layers", false, "show which layer set each value")
	return cmd
}

// layerColumn is the widest "key = value" the layer comments of config --layers
// line up after; a longer line (a script) has its comment right after it, so
// that it does not pad every other line to its width.
const layerColumn = 72

// printLayers prints each setting with the layer that set it.
func printLayers(w io.Writer, settings []manifest.Setting) error {
	col := 0
	for _, s := range settings {
		if n := utf8.RuneCountInString(s.Key + " = " + s.Value); n <= layerColumn {
			col = max(col, n)
		}
	}
	bw := bufio.NewWriter(w)
	for _, s := range settings {
		left := s.Key + " = " + s.Value
		pad := max(col-utf8.RuneCountInString(left), 0) + 2
		fmt.Fprintf(bw, "%s%s# %s\n", left, strings.Repeat(" ", pad), s.Layer)
	}
	return bw.Flush()
}
