package cli

import (
	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/cli/insandbox"
)

func init() {
	addCommand(func(a *app) *cobra.Command { return insandbox.EgressProxyCommand(a.inSandbox()) })
}
