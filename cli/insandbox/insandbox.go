// Package insandbox holds the hidden commands airlock runs inside a sandbox
// (supervise and its helpers, egress-proxy): the full CLI registers them, and
// the binary injected into sandboxes is built of them alone (Main), so every
// process it starts there (PID 1, each exec) starts in a few milliseconds.
package insandbox

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/exitcode"
)

// Version and BuildID identify the in-sandbox build; the Makefile sets both at
// link time as it sets cli's (-X github.com/airlock-dev/airlock/cli/insandbox.BuildID=…).
var (
	Version = "0.1.0-dev"
	BuildID = "unknown"
)

// IO is what the commands write to, and the -q flag they read when they run.
type IO struct {
	Stdout, Stderr io.Writer
	Quiet          *bool
}

// Main runs the in-sandbox build of airlock with args and returns its exit
// code: the commands above and version, with the CLI's -q, its "airlock: "
// error lines and its exit codes (design.md §9).
func Main(args []string) int {
	var quiet bool
	o := IO{Stdout: os.Stdout, Stderr: os.Stderr, Quiet: &quiet}
	root := &cobra.Command{
		Use:           "airlock",
		Short:         "airlock's processes inside a sandbox (this build runs only there)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().BoolVarP(&quiet, "quiet", "q", false, "print less: no progress, no shutdown lines")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return exitcode.With(exitcode.Usage, fmt.Errorf("%w\nSee '%s --help'.", err, c.CommandPath()))
	})
	root.AddCommand(SuperviseCommand(o), EgressProxyCommand(o), &cobra.Command{
		Use:   "version",
		Short: "Print the version and build of this binary",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Fprintf(o.Stdout, "airlock %s (build %s, in-sandbox)\n", Version, BuildID)
		},
	})
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitcode.OK
	}
	var ee *exitcode.Error
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintln(o.Stderr, "airlock: "+ee.Err.Error())
		}
		return ee.Code
	}
	fmt.Fprintln(o.Stderr, "airlock: "+err.Error())
	if exitcode.IsUsage(err) {
		return exitcode.Usage
	}
	return exitcode.Failure
}
