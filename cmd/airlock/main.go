//go:build !insandbox

// Command airlock turns a project's sandbox.toml into a Docker sandbox.
//
// Built with the tag insandbox it is the binary airlock injects into every
// sandbox instead: only the in-sandbox commands (main_insandbox.go).
package main

import (
	"os"

	"github.com/airlock-dev/airlock/cli"
	"github.com/airlock-dev/airlock/daemon"
	"github.com/airlock-dev/airlock/internal/startup"
)

// The command line speaks to the daemon through its API; `airlock daemon run`
// is the daemon itself, handed to it here.
func main() {
	startup.GCForCommand()
	os.Exit(cli.Main(os.Args[1:], cli.Options{RunDaemon: daemon.Main}))
}
