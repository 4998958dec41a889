//go:build !linux

package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

func init() { addCommand(newSuperviseCommand) }

// newSuperviseCommand stands in for the in-container supervisor (cmd_supervise.go),
// which runs only on Linux: the CLI injects a Linux airlock binary into every
// sandbox (see cli/supervisor.go).
func newSuperviseCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:                "supervise",
		Short:              "Run the sandbox's daemons and main command as PID 1 (Linux only)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withCode(ExitAirlock, fmt.Errorf("cannot supervise: the supervisor runs only on Linux, as PID 1 of a sandbox; this is airlock for %s/%s", runtime.GOOS, runtime.GOARCH))
		},
	}
}
