//go:build !linux

package insandbox

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/exitcode"
)

// SuperviseCommand stands in for the in-container supervisor (supervise.go),
// which runs only on Linux: the CLI injects a Linux airlock binary into every
// sandbox (see cli/supervisor.go).
func SuperviseCommand(o IO) *cobra.Command {
	return &cobra.Command{
		Use:                "supervise",
		Short:              "Run the sandbox's daemons and main command as PID 1 (Linux only)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitcode.With(exitcode.Airlock, fmt.Errorf("cannot supervise: the supervisor runs only on Linux, as PID 1 of a sandbox; this is airlock for %s/%s", runtime.GOOS, runtime.GOARCH))
		},
	}
}
