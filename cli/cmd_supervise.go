package cli

import (
	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/cli/insandbox"
)

func init() {
	addCommand(func(a *app) *cobra.Command { return insandbox.SuperviseCommand(a.inSandbox()) })
}

// inSandbox is what the in-sandbox commands (package insandbox) write to.
func (a *app) inSandbox() insandbox.IO {
	return insandbox.IO{Stdout: a.stdout, Stderr: a.stderr, Quiet: &a.opts.quiet}
}
