// Package exitcode holds the exit codes of design.md §9, the error that
// carries one up to a command's main, and the coded errors of what runs
// sandboxes and reads the project's files, which a command turns into its own.
package exitcode

import (
	"errors"
	"fmt"
	"strings"
)

// Exit codes of design.md §9.
const (
	OK          = 0
	Failure     = 1
	Usage       = 2
	Airlock     = 125
	NotExec     = 126
	NotFound    = 127
	Interrupted = 130
)

// Error carries an exit code up to main; Err, when not nil, is the message
// printed on stderr.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// With wraps err so that main exits with code (nil stays nil).
func With(code int, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// Only is the error of a command that ends with code and prints nothing.
func Only(code int) error { return &Error{Code: code} }

// IsUsage recognises cobra's own argument errors, which it returns without a
// type of their own: they end with Usage.
func IsUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires at most", "flag needs an argument", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// Coded is a failure with the exit code the command should end with: Usage for
// a config error, Airlock when airlock or the sandbox failed. The backends and
// the project's files (package projectfs) return it; OfSandbox makes it the
// command's Error. It is a type apart from Error so that errors.As tells a
// failure to report from an exit already decided.
type Coded struct {
	Code int // Usage or Airlock
	Err  error
}

func (e *Coded) Error() string { return e.Err.Error() }

func (e *Coded) Unwrap() error { return e.Err }

// ErrNotFound is returned for a sandbox ID with no primary container.
var ErrNotFound = errors.New("no such sandbox")

// OfSandbox is the error a command ends with for err, a failure of a backend
// or of the project's files: a Coded error's code (a config error marked as
// Config does), Failure for ErrNotFound, an Error as it is, else Airlock.
func OfSandbox(err error) error {
	if err == nil {
		return nil
	}
	var ce *Coded
	if errors.As(err, &ce) {
		if ce.Code == Usage {
			return Config(ce.Err)
		}
		return With(ce.Code, err)
	}
	if errors.Is(err, ErrNotFound) {
		return With(Failure, err)
	}
	var ee *Error
	if errors.As(err, &ee) {
		return err
	}
	return With(Airlock, err)
}

// Config is err as a config error: exit Usage, "config error: " before each
// of its lines.
func Config(err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = "config error: " + l
	}
	return With(Usage, errors.New(strings.Join(lines, "\n")))
}
