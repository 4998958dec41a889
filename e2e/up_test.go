//go:build linux

// The pseudo-terminal checks read termios with TCGETS, which is Linux's.

package e2e

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/test/clitest"
)

const upManifest = `
[sandbox]
image = "{{image}}"

[env]
FOO = "${E2E_FOO}"

[daemons.ticker]
command = ["sh", "-c", "echo ticker-up; exec sleep 3600"]
timeout = 1
ready = { log = "ticker-up", timeout = "10s" }
`

// ptyOutput collects what the CLI writes to its terminal.
type ptyOutput struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (o *ptyOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// TestUpInteractive: `airlock up` through a pseudo-terminal: a prompt, a command's
// output, `exit 5` gives 5, the terminal is restored and the sandbox is stopped.
func TestUpInteractive(t *testing.T) {
	limit(t)
	e := newEnv(t, upManifest)
	e.Extra = append(e.Extra, "E2E_FOO=foo-value", "TERM=dumb")

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("cannot open a pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 80}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(clitest.Bin, "up")
	cmd.Dir = e.Project
	cmd.Env = e.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	defer func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	}()

	out := &ptyOutput{}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := ptmx.Read(b)
			out.mu.Lock()
			out.buf.Write(b[:n])
			out.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	wait := func(what string, cond func(s string) bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !cond(out.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; terminal shows:\n%q", what, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	wait("a shell prompt", func(s string) bool { return strings.Contains(s, "project # ") })
	if strings.Contains(out.String(), "\x1b[6n") {
		// busybox's line editor asks where the cursor is: answer like a terminal.
		if _, err := ptmx.Write([]byte("\x1b[24;1R")); err != nil {
			t.Fatal(err)
		}
	}
	if during, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS); err == nil && during.Lflag&unix.ECHO != 0 {
		t.Errorf("the terminal is not in raw mode during the shell (ECHO is on)")
	}
	if _, err := ptmx.Write([]byte("echo hi-$((2+3)) $FOO\r")); err != nil {
		t.Fatal(err)
	}
	wait("the command's output", func(s string) bool { return strings.Contains(s, "hi-5 foo-value") })
	if _, err := ptmx.Write([]byte("exit 5\r")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		ee, ok := waitErr.(*exec.ExitError)
		if !ok || ee.ExitCode() != 5 {
			t.Errorf("airlock up after `exit 5`: %v, want exit status 5; terminal:\n%q", waitErr, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("airlock up did not end after `exit 5`; terminal:\n%q", out.String())
	}

	after, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if *before != *after {
		t.Errorf("the terminal was not restored:\nbefore %+v\nafter  %+v", *before, *after)
	}

	ps := e.PS()
	if len(ps) != 1 || ps[0].State != "stopped" {
		t.Errorf("after the shell exited, ps -a lists %+v, want one stopped sandbox", ps)
	}
	e.MustRun("down")
	e.assertClean()
}

// TestUpDetachExecRestartRecreateDown: up -d, a second up refused, exec gets [env],
// a stopped sandbox started again keeps its files, a changed manifest recreates it,
// down removes everything.
func TestUpDetachExecRestartRecreateDown(t *testing.T) {
	limit(t)
	e := newEnv(t, upManifest)
	e.Extra = append(e.Extra, "E2E_FOO=foo-value")

	r := e.MustRun("up", "-d")
	id := strings.TrimSpace(r.Stdout)
	if id == "" || strings.Contains(id, "\n") {
		t.Fatalf("up -d should print the sandbox ID alone, got %s", r)
	}
	// Nothing of the sandbox's state lives on the host (design.md §2): it stays in
	// the sandbox and is read through the Engine API.
	if _, err := os.Stat(e.StateDir(id)); err == nil {
		t.Errorf("a host state dir %s exists for sandbox %s", e.StateDir(id), id)
	}
	if ps := e.PS(); len(ps) != 1 || ps[0].ID != id || !isRunning(ps[0].State) || ps[0].Daemons == nil || ps[0].Daemons.Up != 1 {
		t.Errorf("ps -a after up -d = %+v, want %s running with 1 daemon up", ps, id)
	}

	// A second up while it runs is refused, naming it and suggesting exec.
	r = e.Run("up")
	if r.Code == 0 {
		t.Errorf("a second up while one runs: want a failure, got %s", r)
	}
	contains(t, "stderr of a second up", r.Stderr, id, "airlock exec")
	// A second up -d is idempotent: the same ID, exit 0 (docs/sandbox.md).
	r = e.Run("up", "-d")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != id {
		t.Errorf("a second up -d while one runs: want exit 0 and %s, got %s", id, r)
	}

	r = e.MustRun("exec", "--", "sh", "-c", "echo $FOO")
	if r.Stdout != "foo-value\n" {
		t.Errorf("exec -- sh -c 'echo $FOO' = %q, want %q", r.Stdout, "foo-value\n")
	}
	r = e.Run("exec", "--", "sh", "-c", "exit 3")
	if r.Code != 3 {
		t.Errorf("exec -- sh -c 'exit 3': want exit 3, got %s", r)
	}
	e.MustRun("exec", "--", "sh", "-c", "echo kept > /kept-file")

	// Stopped, then started again: the file is still there.
	e.MustRun("stop")
	if ps := e.PS(); len(ps) != 1 || ps[0].State != "stopped" {
		t.Errorf("after stop, ps -a = %+v, want one stopped sandbox", ps)
	}
	r = e.MustRun("up", "-d")
	if got := strings.TrimSpace(r.Stdout); got != id {
		t.Errorf("up -d of a stopped sandbox gave %q, want the same sandbox %s", got, id)
	}
	r = e.MustRun("exec", "--", "cat", "/kept-file")
	if r.Stdout != "kept\n" {
		t.Errorf("after a restart, /kept-file = %q, want %q", r.Stdout, "kept\n")
	}

	// A changed manifest: recreated with a notice, the file is gone.
	e.MustRun("stop")
	e.WriteManifest(strings.Replace(upManifest, `FOO = "${E2E_FOO}"`, "FOO = \"${E2E_FOO}\"\nBAR = \"changed\"", 1))
	r = e.MustRun("up", "-d")
	newID := strings.TrimSpace(r.Stdout)
	contains(t, "stderr of up -d after a manifest change", r.Stderr, "recreat")
	r = e.Run("exec", "--", "sh", "-c", "echo $BAR; cat /kept-file")
	if r.Code == 0 || !strings.HasPrefix(r.Stdout, "changed\n") {
		t.Errorf("after recreation: want BAR=changed and no /kept-file, got %s", r)
	}
	if newID != id {
		if _, err := os.Stat(e.StateDir(id)); err == nil {
			t.Errorf("the state dir of the replaced sandbox %s remains", id)
		}
	}
	if ps := e.PS(); len(ps) != 1 {
		t.Errorf("after recreation ps -a lists %d sandboxes, want 1: %+v", len(ps), ps)
	}

	e.MustRun("down")
	if ps := e.PS(); len(ps) != 0 {
		t.Errorf("after down, ps -a lists %+v", ps)
	}
	e.assertClean()
}
