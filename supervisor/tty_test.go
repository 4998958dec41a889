//go:build linux

package supervisor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns a new pseudo-terminal's master and slave.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestTerminal: on a terminal the main command is the foreground process
// group and gets window-size changes; the shutdown lines are drawn with a
// spinner and colour, and without colour under NO_COLOR.
func TestTerminal(t *testing.T) {
	t.Parallel()
	for _, noColor := range []bool{false, true} {
		t.Run(fmt.Sprintf("NO_COLOR=%v", noColor), func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			s.spec.Main.Argv = helper(s.dir)
			s.spec.Main.Env = []EnvEntry{helperEntry("winch")}
			d := s.daemon("slowstop", sh("trap 'sleep 0.4; exit 0' TERM; while :; do sleep 0.05; done"))
			d.Ready = &Ready{Cmd: []string{"true"}, Timeout: "20s"}
			data, err := json.Marshal(&s.spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(s.path("spec.json"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			master, slave := openPTY(t)
			defer master.Close()
			cmd := exec.Command(airlockBin, "supervise", "--spec", s.path("spec.json"), "--backoff-unit", "10ms")
			cmd.Env = append(os.Environ(), "TERM=xterm")
			if noColor {
				cmd.Env = append(cmd.Env, "NO_COLOR=1")
			}
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			var mu sync.Mutex
			var out bytes.Buffer
			copied := make(chan struct{})
			go func() {
				defer close(copied)
				buf := make([]byte, 4096)
				for {
					n, err := master.Read(buf)
					mu.Lock()
					out.Write(buf[:n])
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
			s.waitFor("the main command", func() bool { _, err := os.Stat(s.path("armed")); return err == nil })
			if err := unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
				t.Fatal(err)
			}
			waitErr := make(chan error, 1)
			go func() { waitErr <- cmd.Wait() }()
			select {
			case err = <-waitErr:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("the supervisor did not exit")
			}
			select {
			case <-copied:
			case <-time.After(5 * time.Second):
			}
			mu.Lock()
			text := out.String()
			mu.Unlock()
			if err != nil {
				t.Fatalf("supervisor: %v; terminal:\n%q", err, text)
			}
			if !strings.Contains(text, "daemon slowstop: stopping") {
				t.Errorf("no spinner line: %q", text)
			}
			hasColor := strings.Contains(text, ansiGreen+"✔"+ansiReset+" daemon slowstop: shut down")
			plain := strings.Contains(text, "✔ daemon slowstop: shut down")
			if noColor && (!plain || strings.Contains(text, "\x1b[3")) || !noColor && !hasColor {
				t.Errorf("colour %v, terminal output %q", !noColor, text)
			}
		})
	}
}
