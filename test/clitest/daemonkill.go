package clitest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// KillDaemons sends SIGKILL to every control daemon process of this
// environment (found in /proc by its command line and XDG_RUNTIME_DIR: the
// one serving, and one still starting that has no pid file yet) and returns
// their pids.
func (e *Env) KillDaemons() []int {
	var killed []int
	entries, _ := os.ReadDir("/proc")
	mark := []byte("XDG_RUNTIME_DIR=" + e.Runtime + "\x00")
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if !bytes.Contains(cmdline, []byte("daemon\x00run")) {
			continue
		}
		if env, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "environ")); bytes.Contains(env, mark) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, pid)
			}
		}
	}
	return killed
}

// LoadCPUs keeps n CPUs busy until the test ends: n shell loops spinning, in
// processes of their own (so the Go scheduler of the test does not share
// them out).
func LoadCPUs(t testing.TB, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatalf("cannot start a busy loop: %v", err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}
