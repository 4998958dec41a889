// Package exitcode holds the exit codes of design.md §9 and the error that
// carries one up to a command's main.
package exitcode

import (
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
