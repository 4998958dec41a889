package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/presets"
	"github.com/spf13/cobra"
)

func init() { addCommand(newPresetsCommand) }

func newPresetsCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "presets",
		Short: "List and show the presets a manifest can name",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "ls",
		Short: "List user and built-in presets (a user preset shadows a built-in of the same name)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := a.presetList()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSOURCE\tDESCRIPTION")
			for _, p := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", p.name, p.source, p.description)
			}
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "show NAME",
		Short: "Print a preset's TOML",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := a.presetList()
			if err != nil {
				return err
			}
			for _, p := range list {
				if p.name == args[0] {
					_, err := a.stdout.Write(p.data)
					return err
				}
			}
			names := make([]string, len(list))
			for i, p := range list {
				names[i] = p.name
			}
			return withCode(ExitUsage, fmt.Errorf("unknown preset %q (known: %s)", args[0], strings.Join(names, ", ")))
		},
	})
	return cmd
}

type presetEntry struct {
	name, source, description string
	data                      []byte
}

// presetList returns the presets by name: user presets, then the built-ins they do not shadow.
func (a *app) presetList() ([]presetEntry, error) {
	p, err := a.paths()
	if err != nil {
		return nil, err
	}
	byName := map[string]presetEntry{}
	for _, n := range manifest.BuiltinNames(presets.FS) {
		data, _ := fs.ReadFile(presets.FS, n+".toml")
		byName[n] = presetEntry{name: n, source: "built-in", description: presets.Description(data), data: data}
	}
	entries, err := os.ReadDir(p.UserPresets())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cannot read the user presets in %s: %w", p.UserPresets(), err)
	}
	for _, e := range entries {
		n, ok := strings.CutSuffix(e.Name(), ".toml")
		if !ok || e.IsDir() {
			continue
		}
		file := filepath.Join(p.UserPresets(), e.Name())
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("cannot read preset %s: %w", file, err)
		}
		src := "user " + file
		if _, shadows := byName[n]; shadows {
			src += " (shadows the built-in)"
		}
		byName[n] = presetEntry{name: n, source: src, description: presets.Description(data), data: data}
	}
	list := make([]presetEntry, 0, len(byName))
	for _, e := range byName {
		list = append(list, e)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	return list, nil
}
