package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/paths"
)

// An API exec's process, found again to be signalled. The daemon starts each
// of its execs through `supervise exec` with ExecIDEnv set to the exec's ID
// (a -e value, which a supervisor that predates this takes as any other). The
// exec's process makes itself the leader of a process group of its own and
// writes its PID, with its start time, to ExecPIDFile(dir, ID) before it
// becomes the command (the same process, so the same PID). `supervise signal
// --exec ID SIG`, a second exec, reads the file and signals that process group.
//
// The start time tells the exec's process from a later one that took its PID:
// while any process of the group lives the kernel hands its number to no new
// process, so a leader gone with no new process of that PID leaves only the
// group's members to signal, and a new one means the whole group is gone.

// ExecIDEnv is the variable that names an API exec to `supervise exec`; the
// command sees it too (its own exec ID).
const ExecIDEnv = "AIRLOCK_EXEC_ID"

// ExecPIDDir is where the execs' PID files are: the sandbox's run tmpfs
// (backend.RunMount), mode 1777, so a file is its writer's alone.
const ExecPIDDir = "/airlock/run"

// execPIDPrefix starts the name of an exec's PID file.
const execPIDPrefix = "pid-"

// ExecPIDFile is the PID file of exec id in dir.
func ExecPIDFile(dir, id string) string { return filepath.Join(dir, execPIDPrefix+id) }

// validExecID: an airlock ID (letters, digits, "-", "_"), so that it names one
// file of dir.
func validExecID(id string) bool {
	if id == "" || len(id) > 200 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// execIDOf is the exec ID among env's NAME=VALUE, "" for none.
func execIDOf(env []string) string {
	id := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, ExecIDEnv+"="); ok {
			id = v
		}
	}
	return id
}

// RecordExecPID makes the calling process the leader of a process group of its
// own and writes its PID and start time to exec id's file in dir, after
// removing the files of execs whose process is gone (so the directory holds
// about one file per running exec). A file already there (never made by the
// daemon: IDs are never used twice) is left alone and nothing is recorded.
func RecordExecPID(dir, id string) error {
	if !validExecID(id) {
		return fmt.Errorf("cannot record exec %q: not an exec ID", id)
	}
	// A session leader (an Engine exec is one, on a terminal or not) leads
	// its group already and cannot move: EPERM is no failure.
	_ = unix.Setpgid(0, 0)
	pruneExecPIDs(dir)
	pid := os.Getpid()
	start, err := processStart(pid)
	if err != nil {
		return fmt.Errorf("cannot record exec %s: %w", id, err)
	}
	f, err := os.OpenFile(ExecPIDFile(dir, id), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("cannot record exec %s: %w", id, err)
	}
	_, err = fmt.Fprintf(f, "%d %d\n", pid, start)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// pruneExecPIDs removes the PID files of dir, this user's, whose process is
// gone (or is another one now).
func pruneExecPIDs(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), execPIDPrefix) {
			continue
		}
		file := filepath.Join(dir, e.Name())
		pid, start, err := readExecPID(file)
		if err != nil {
			continue
		}
		if s, err := processStart(pid); err != nil || s != start {
			_ = os.Remove(file)
		}
	}
}

// readExecPID reads an exec's PID file: a regular file of this user, not a
// link, holding "PID START".
func readExecPID(file string) (pid int, start uint64, err error) {
	f, st, err := paths.OpenRegular(file, os.O_RDONLY, 0)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return 0, 0, fmt.Errorf("%s is not this user's", file)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, 0, err
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0, 0, fmt.Errorf("%s is not a PID file", file)
	}
	if pid, err = strconv.Atoi(fields[0]); err != nil || pid <= 1 {
		return 0, 0, fmt.Errorf("%s is not a PID file", file)
	}
	if start, err = strconv.ParseUint(fields[1], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("%s is not a PID file", file)
	}
	return pid, start, nil
}

// processStart is the start time of process pid (field 22 of its stat, in
// clock ticks since boot): with the PID, it names one process.
func processStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The fields after the command, which is in parentheses and may hold any.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("cannot read the stat of process %d", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	// state is field 3: starttime (22) is the 20th after the command.
	if len(fields) < 20 {
		return 0, fmt.Errorf("cannot read the stat of process %d", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// groupLives reports whether a process of process group pgid runs (one that
// is not a zombie).
func groupLives(pgid int) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		// state (3), ppid (4), pgrp (5)
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 3 && f[0] != "Z" && f[0] != "X" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// ErrExecUnknown: no PID file of that exec (it was not started by this
// supervisor with its ID, or its record was removed).
var ErrExecUnknown = errors.New("no record of its process in the sandbox")

// SignalExec sends sig to the process group of exec id (RecordExecPID). It
// reports whether any process got it: false when the exec's processes are all
// gone (then it removes the file).
func SignalExec(dir, id string, sig syscall.Signal) (bool, error) {
	if !validExecID(id) {
		return false, fmt.Errorf("cannot signal exec %q: not an exec ID", id)
	}
	file := ExecPIDFile(dir, id)
	pid, start, err := readExecPID(file)
	if errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("cannot signal exec %s: %w", id, ErrExecUnknown)
	}
	if err != nil {
		return false, fmt.Errorf("cannot signal exec %s: %w", id, err)
	}
	s, serr := processStart(pid)
	if serr == nil && s != start {
		// Another process has the PID: every process of the group ended.
		_ = os.Remove(file)
		return false, nil
	}
	if !groupLives(pid) && serr != nil {
		// Nothing of the exec runs (what is left are zombies not reaped yet).
		_ = os.Remove(file)
		return false, nil
	}
	gerr := unix.Kill(-pid, sig)
	if serr == nil && gerr != nil {
		// The leader lives outside its group (it could not move): itself.
		gerr = unix.Kill(pid, sig)
	}
	switch {
	case gerr == nil:
		return true, nil
	case errors.Is(gerr, unix.ESRCH):
		_ = os.Remove(file)
		return false, nil
	}
	return false, fmt.Errorf("cannot send %s to exec %s (process %d): %w", signalName(sig), id, pid, gerr)
}
