// Package projectfs is the host's side of a sandbox's files, the same for every
// backend and for the command line: the project dir and its .airlockignore,
// the [copies] entries and the [sandbox.build] context as tar streams, host
// paths of the manifest made absolute, and the copy back of `run --output`
// into the project dir (Output). It opens no Engine or cluster client: the
// backends and the command line move its archives.
package projectfs

import (
	"fmt"

	"github.com/airlock-dev/airlock/internal/exitcode"
)

// failed is an error of airlock or the sandbox (exit 125).
func failed(format string, args ...any) error {
	return &exitcode.Coded{Code: exitcode.Airlock, Err: fmt.Errorf(format, args...)}
}

// configErr is a config error (exit 2).
func configErr(format string, args ...any) error {
	return &exitcode.Coded{Code: exitcode.Usage, Err: fmt.Errorf(format, args...)}
}
