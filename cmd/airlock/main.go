//go:build !insandbox

// Command airlock turns a project's sandbox.toml into a Docker sandbox.
//
// Built with the tag insandbox it is the binary airlock injects into every
// sandbox instead: only the in-sandbox commands (main_insandbox.go).
package main

import (
	"os"

	"github.com/airlock-dev/airlock/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
