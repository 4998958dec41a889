//go:build !linux

package supervisor

import (
	"errors"
	"runtime"
	"syscall"

	"golang.org/x/term"
)

// errLinuxOnly: the supervisor runs only on Linux, as PID 1 of a sandbox; on
// another system (the CLI and daemon on macOS) its package builds for its types.
var errLinuxOnly = errors.New("the airlock supervisor runs only on Linux, not on " + runtime.GOOS)

func setNoNewPrivs() error { return errLinuxOnly }

func setChildSubreaper() error { return errLinuxOnly }

func switchUser(*syscall.Credential) error { return errLinuxOnly }

func isTermios(fd int) bool { return term.IsTerminal(fd) }

// nextData: holes are not looked for elsewhere than on Linux.
func nextData(_ interface{ Fd() uintptr }, off, _ int64) (int64, bool) { return off, false }

// processEnded: never called off Linux (the supervisor does not run there).
func processEnded(int) bool { return false }
