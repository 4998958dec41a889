//go:build insandbox

package main

import (
	"os"

	"github.com/airlock-dev/airlock/cli/insandbox"
)

func main() {
	os.Exit(insandbox.Main(os.Args[1:]))
}
