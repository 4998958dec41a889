// Command airlock turns a project's sandbox.toml into a Docker sandbox.
package main

import (
	"os"

	"github.com/airlock-dev/airlock/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
