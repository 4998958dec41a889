package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// Exit codes of design.md §9 that the supervisor itself produces.
const (
	ExitAirlock  = 125
	ExitNotExec  = 126
	ExitNotFound = 127
)

// forwardedSignals reach the main command's process group. The terminating
// ones, received before the main command starts, abort the start instead.
var (
	forwardedSignals   = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH}
	terminatingSignals = map[os.Signal]bool{unix.SIGINT: true, unix.SIGTERM: true, unix.SIGHUP: true, unix.SIGQUIT: true}
)

// mainProc is the running main command.
type mainProc struct {
	pid        int
	ch         <-chan unix.WaitStatus
	foreground bool // it holds the terminal's foreground
	ttyFd      int
}

// startMain starts the main command in its own process group, in the
// terminal's foreground when stdin is the supervisor's controlling terminal
// and the supervisor is in its foreground. The error carries the exit code
// (126 or 127) through mainStartError.
func startMain(r *reaper, m *Main, cred *syscall.Credential, env []string, stdin, stdout, stderr *os.File) (*mainProc, error) {
	p := proc{
		argv:   m.Argv,
		env:    env,
		dir:    m.Cwd,
		files:  []uintptr{stdin.Fd(), stdout.Fd(), stderr.Fd()},
		cred:   cred,
		harden: *m.Harden,
	}
	fd := int(stdin.Fd())
	if isForegroundTTY(fd) {
		p.foreground, p.ctty = true, fd
	}
	pid, ch, err := r.start(p)
	if err != nil {
		code := ExitNotExec
		if errors.Is(err, errNotFound) {
			code = ExitNotFound
		}
		var wd *WorkdirError
		if errors.As(err, &wd) {
			// The sandbox cannot run anything there: airlock's 125, not the command's 126.
			return nil, &mainStartError{code: ExitAirlock, err: err}
		}
		return nil, &mainStartError{code: code, err: fmt.Errorf("cannot run main command %s: %w", m.Argv[0], err)}
	}
	return &mainProc{pid: pid, ch: ch, foreground: p.foreground, ttyFd: fd}, nil
}

type mainStartError struct {
	code int
	err  error
}

func (e *mainStartError) Error() string { return e.err.Error() }
func (e *mainStartError) Unwrap() error { return e.err }

// isForegroundTTY reports whether fd is a terminal whose foreground process
// group is the supervisor's own (so it is our controlling terminal and we
// may hand it over).
func isForegroundTTY(fd int) bool {
	if !isTermios(fd) {
		return false
	}
	pg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return err == nil && pg == unix.Getpgrp()
}

// forward sends sig to the main command's process group, as a terminal does.
func (m *mainProc) forward(sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		killGroup(m.pid, s)
	}
}

// reclaimTerminal takes the terminal's foreground back after the main
// command ended, so the shutdown lines and spinners can be drawn. SIGTTOU is
// ignored from here on (nothing is started after the main command).
func (m *mainProc) reclaimTerminal() {
	if !m.foreground {
		return
	}
	signal.Ignore(unix.SIGTTOU)
	_ = unix.IoctlSetPointerInt(m.ttyFd, unix.TIOCSPGRP, unix.Getpgrp())
}
