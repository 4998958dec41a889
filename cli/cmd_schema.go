package cli

import (
	"github.com/airlock-dev/airlock/manifest"
	"github.com/spf13/cobra"
)

func init() { addCommand(newSchemaCommand) }

func newSchemaCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of sandbox.toml, for editors",
		Long:  "Print the JSON Schema (draft 2020-12) of sandbox.toml. docs/sandbox.schema.json is the same document.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := a.stdout.Write(manifest.Schema())
			return err
		},
	}
}
