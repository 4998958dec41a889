package backend

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/airlock-dev/airlock/internal/exitcode"
)

// The errors a backend returns, which the daemon tells apart.

// Error is a failure with the exit code the CLI should end with (design.md §9):
// code 2 for a config error, 125 when airlock or the sandbox failed. The
// project's files (package projectfs) return the same type.
type Error = exitcode.Coded

func failed(format string, args ...any) error {
	return &Error{Code: 125, Err: fmt.Errorf(format, args...)}
}

func configErr(format string, args ...any) error {
	return &Error{Code: 2, Err: fmt.Errorf(format, args...)}
}

// ErrNotFound is returned for a sandbox ID with no primary container.
var ErrNotFound = exitcode.ErrNotFound

// ErrNoSuchPath is what ReadArchive and WriteArchive wrap for a path that is
// not in the sandbox.
var ErrNoSuchPath = errors.New("no such file or directory in the sandbox")

// ErrNotDirectory is what WriteArchive wraps when the folder to extract into,
// or one on the way to it, is something else.
var ErrNotDirectory = errors.New("not a directory")

// ErrIsDirectory is what WriteArchive wraps when a file of the archive (or
// the one file written) would replace a folder of the sandbox.
var ErrIsDirectory = errors.New("is a directory")

// overwrite is the Engine's message when an entry of an archive would replace
// a folder by something else, or the other way round. Engine 20.10 names the
// path whole (twice); a current one names the entry relative to the extraction
// point, then that point.
var overwrite = regexp.MustCompile(`cannot overwrite (non-)?directory "([^"]*)" with (?:non-)?directory(?: "([^"]*)")?`)

// KindOfExtractError is the caller's mistake that an extraction into dir
// failed with (msg, the Engine's or the extractor's words): an error wrapping
// ErrIsDirectory (a file over a folder) or ErrNotDirectory (a folder over a
// file, an entry below a file); nil for anything else.
func KindOfExtractError(dir, msg string) error {
	if m := overwrite.FindStringSubmatch(msg); m != nil {
		if !path.IsAbs(m[2]) && path.IsAbs(m[3]) {
			m[2] = path.Join(m[3], m[2])
		}
		if m[1] != "" {
			return fmt.Errorf("cannot write into %s: %s is a file of the sandbox and the archive has a folder there: %w", dir, m[2], ErrNotDirectory)
		}
		return fmt.Errorf("cannot write into %s: %s is a folder of the sandbox and a file cannot replace it: %w", dir, m[2], ErrIsDirectory)
	}
	switch {
	case strings.Contains(msg, "not a directory"):
		return fmt.Errorf("cannot write into %s: a path of the archive is below a file of the sandbox (%s): %w", dir, strings.TrimSpace(msg), ErrNotDirectory)
	case strings.Contains(msg, "is a directory"):
		return fmt.Errorf("cannot write into %s: a file of the archive would replace a folder of the sandbox (%s): %w", dir, strings.TrimSpace(msg), ErrIsDirectory)
	}
	return nil
}

// ErrNotRegular is returned for a state file that a process in the sandbox replaced
// with something other than a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrUnhealthy is a parked sandbox that refused a claim because something it
// runs is not healthy (a daemon exited), or whose container is gone.
var ErrUnhealthy = errors.New("the parked sandbox is not healthy")

// PortInUseError is a start that failed because a host port of sandbox.ports
// is taken (by another process or another container).
type PortInUseError struct {
	Addr string // host address and port, e.g. 127.0.0.1:18080 ("" when the Engine did not say)
	Spec string // the sandbox.ports entry that binds it ("" when unknown)
	Err  error  // the Engine's error
}

func (e *PortInUseError) Error() string {
	switch {
	case e.Addr == "":
		return fmt.Sprintf("cannot start the sandbox: a host port of sandbox.ports is already in use (%v)", e.Err)
	case e.Spec == "":
		return fmt.Sprintf("cannot start the sandbox: host port %s is already in use (free it or publish another port in sandbox.ports)", e.Addr)
	}
	return fmt.Sprintf("cannot start the sandbox: host port %s of sandbox.ports %q is already in use (free it or publish another port)", e.Addr, e.Spec)
}

func (e *PortInUseError) Unwrap() error { return e.Err }
