package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Errors of lookPath and start, mapped to exit codes 127 and 126.
var (
	errNotFound      = errors.New("not found")
	errNotExecutable = errors.New("not executable")
)

// proc describes one process to start.
type proc struct {
	argv   []string
	env    []string
	dir    string
	files  []uintptr           // stdin, stdout, stderr
	cred   *syscall.Credential // the user to switch to; nil: the supervisor's
	harden bool                // PR_SET_NO_NEW_PRIVS
	// userKey is the manifest key of the process's user (sandbox.user),
	// named as a fix when it cannot enter dir.
	userKey string

	// Terminal: when foreground is set the child's process group takes the
	// terminal ctty (an fd of the supervisor) before exec.
	foreground bool
	ctty       int
}

// start finds the program and starts it in a new process group.
//
// harden: os/exec has no attribute for no_new_privs, and the flag is a
// per-thread one inherited over fork. So the fork runs on a goroutine locked
// to its OS thread, which sets PR_SET_NO_NEW_PRIVS first and never unlocks:
// when the goroutine returns the runtime ends that thread, so the flag never
// leaks to goroutines that start unhardened processes (and the runtime never
// clones new threads from a locked one). Because that thread dies right after
// the fork, Pdeathsig (tied to the forking thread) is never used.
func (r *reaper) start(p proc) (int, <-chan unix.WaitStatus, error) {
	path, err := lookPath(p.argv[0], p.env)
	if err != nil {
		return 0, nil, err
	}
	if p.dir != "" {
		if fi, err := os.Stat(p.dir); err != nil || !fi.IsDir() {
			return 0, nil, fmt.Errorf("cannot use working directory %s: not a directory", p.dir)
		}
	}
	attr := &syscall.ProcAttr{
		Dir:   p.dir,
		Env:   p.env,
		Files: p.files,
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	if p.foreground {
		attr.Sys.Foreground = true
		attr.Sys.Ctty = p.ctty
	}
	if p.cred != nil {
		c := *p.cred
		attr.Sys.Credential = &c
	}
	if !p.harden {
		pid, ch, err := r.spawn(syscall.ForkExec, path, p.argv, attr)
		return pid, ch, p.startError(path, err)
	}
	type result struct {
		pid int
		ch  <-chan unix.WaitStatus
		err error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: this thread must die with the goroutine.
		if err := setNoNewPrivs(); err != nil {
			res <- result{err: fmt.Errorf("cannot set no_new_privs: %w", err)}
			return
		}
		pid, ch, err := r.spawn(syscall.ForkExec, path, p.argv, attr)
		res <- result{pid, ch, err}
	}()
	out := <-res
	return out.pid, out.ch, p.startError(path, out.err)
}

// startError is the error of a failed fork and exec of path: a working
// directory the process's user cannot enter (the child's chdir fails with
// EACCES, as an exec of a file it may not run does) is told as such, else
// execError.
func (p proc) startError(path string, err error) error {
	if errors.Is(err, syscall.EACCES) && p.dir != "" {
		uid, gid, groups := uint32(os.Getuid()), uint32(os.Getgid()), []uint32(nil)
		if p.cred != nil {
			uid, gid, groups = p.cred.Uid, p.cred.Gid, p.cred.Groups
		} else {
			groups = currentGroups()
		}
		if werr := workdirDenied(p.dir, uid, gid, groups, p.userKey); werr != nil {
			return werr
		}
	}
	return execError(path, err)
}

// WorkdirError says that a process's user cannot enter its working
// directory (Dir), or a folder above it (Denied), by their owners and modes.
type WorkdirError struct {
	Dir, Denied string
	UID         uint32
	Owner       string // "uid:gid, mode 0700" of Denied
	UserKey     string // the manifest key of the user ("" for sandbox.user)
}

func (e *WorkdirError) Error() string {
	key := e.UserKey
	if key == "" {
		key = "sandbox.user"
	}
	return fmt.Sprintf("cannot use working directory %s: uid %d cannot enter %s (%s): run as a user that can (%s), "+
		"let others enter it (chmod o+x %s), or copy the project in rather than mount it (sandbox.project = \"copy\")",
		e.Dir, e.UID, e.Denied, e.Owner, key, e.Denied)
}

// workdirDenied returns a *WorkdirError when a process of uid, gid and groups
// cannot search dir or one of the folders above it (links resolved), as the
// kernel decides by owner, group and mode (ACLs aside); nil when it can, when
// it is root, or when that cannot be told.
func workdirDenied(dir string, uid, gid uint32, groups []uint32, userKey string) error {
	if uid == 0 || !filepath.IsAbs(dir) {
		return nil
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = filepath.Clean(dir)
	}
	p := "/"
	for _, part := range append([]string{""}, strings.Split(strings.TrimPrefix(real, "/"), "/")...) {
		p = filepath.Join(p, part)
		st, err := os.Stat(p)
		if err != nil {
			return nil
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		perm := uint32(st.Mode().Perm())
		var bits uint32
		switch {
		case sys.Uid == uid:
			bits = perm >> 6
		case sys.Gid == gid || slices.Contains(groups, sys.Gid):
			bits = perm >> 3
		default:
			bits = perm
		}
		if bits&1 == 0 {
			return &WorkdirError{Dir: dir, Denied: p, UID: uid, UserKey: userKey,
				Owner: fmt.Sprintf("owned by %d:%d, mode %04o", sys.Uid, sys.Gid, perm)}
		}
	}
	return nil
}

// execError maps the errno of a failed exec to errNotFound/errNotExecutable.
func execError(path string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%s: %w", path, errNotFound)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%s: %w (%w)", path, errNotExecutable, err)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// lookPath resolves name like a shell does, on the PATH of env (or the
// supervisor's own PATH when env has none).
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, checkExecutable(name)
	}
	pathEnv, ok := lookupEnv(env, "PATH")
	if !ok {
		pathEnv = os.Getenv("PATH")
	}
	var firstErr error
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if firstErr == nil && errors.Is(err, errNotExecutable) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", fmt.Errorf("%s: %w", name, errNotFound)
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w", path, errNotFound)
		}
		return fmt.Errorf("%s: %w (%w)", path, errNotExecutable, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("%s: %w (is a directory)", path, errNotExecutable)
	}
	if err := unix.Access(path, unix.X_OK); err != nil {
		return fmt.Errorf("%s: %w", path, errNotExecutable)
	}
	return nil
}

// exitStatus is how a process ended.
type exitStatus struct {
	code   int            // exit code, when !signaled
	signal syscall.Signal // the killing signal, when signaled
}

func fromWaitStatus(ws unix.WaitStatus) exitStatus {
	if ws.Signaled() {
		return exitStatus{signal: syscall.Signal(ws.Signal())}
	}
	return exitStatus{code: ws.ExitStatus()}
}

func (s exitStatus) signaled() bool { return s.signal != 0 }

// shellCode is the exit code a shell reports: the code, or 128+N.
func (s exitStatus) shellCode() int {
	if s.signaled() {
		return 128 + int(s.signal)
	}
	return s.code
}

func (s exitStatus) String() string {
	if s.signaled() {
		return "killed by " + signalName(s.signal)
	}
	return fmt.Sprintf("exit code %d", s.code)
}

// killGroup signals the process group pgid; a group that is gone is no error.
func killGroup(pgid int, sig syscall.Signal) {
	if pgid > 1 {
		_ = unix.Kill(-pgid, sig)
	}
}

// groupAlive reports whether any process is left in group pgid.
func groupAlive(pgid int) bool {
	if pgid <= 1 {
		return false
	}
	err := unix.Kill(-pgid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
