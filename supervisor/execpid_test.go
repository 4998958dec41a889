package supervisor

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExecSignal: `supervise exec` with AIRLOCK_EXEC_ID records its PID; a
// `supervise signal --exec` reaches the exec's whole process group (a child
// it started in the background too), and once none is left says "gone" and
// drops the record; a later exec prunes the records of ended ones. It never
// reaches a process outside the group, whether the exec was started as a
// session leader (as an Engine's exec is) or not.
func TestExecSignal(t *testing.T) {
	t.Parallel()
	for _, setsid := range []bool{true, false} {
		t.Run(fmt.Sprintf("setsid=%v", setsid), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			spec := filepath.Join(dir, "spec.json")
			b, _ := json.Marshal(Spec{Version: 1, LogDir: filepath.Join(dir, "logs"), StatusFile: filepath.Join(dir, "status.jsonl"), Main: Main{Argv: []string{"true"}}})
			if err := os.WriteFile(spec, b, 0o644); err != nil {
				t.Fatal(err)
			}
			pids := filepath.Join(dir, "pids")
			if err := os.Mkdir(pids, 0o700); err != nil {
				t.Fatal(err)
			}
			start := func(id, script string) *exec.Cmd {
				cmd := exec.Command(airlockBin, "supervise", "exec", "--spec", spec, "--pid-dir", pids, "-e", ExecIDEnv+"="+id, "--", "/bin/sh", "-c", script)
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
				return cmd
			}
			signal := func(id, sig string) (string, error) {
				out, err := exec.Command(airlockBin, "supervise", "signal", "--pid-dir", pids, "--exec", id, sig).CombinedOutput()
				return strings.TrimSpace(string(out)), err
			}
			child := filepath.Join(dir, "child.pid")
			cmd := start("exec-one", "echo $"+ExecIDEnv+" > "+filepath.Join(dir, "id")+"; sleep 300 & echo $! > "+child+"; wait")
			waitExec(t, func() bool { _, err := os.Stat(ExecPIDFile(pids, "exec-one")); return err == nil && fileHas(child) })
			if id, _ := os.ReadFile(filepath.Join(dir, "id")); strings.TrimSpace(string(id)) != "exec-one" {
				t.Errorf("the command sees %s=%q, want its exec ID", ExecIDEnv, id)
			}
			b, _ = os.ReadFile(ExecPIDFile(pids, "exec-one"))
			if f := strings.Fields(string(b)); len(f) != 2 || f[0] != strconv.Itoa(cmd.Process.Pid) {
				t.Fatalf("PID file %q, want the exec's PID %d and its start", b, cmd.Process.Pid)
			}
			// Any other exec ID is unknown.
			if out, err := signal("exec-other", "TERM"); err == nil || !strings.Contains(out, "no record of its process") {
				t.Errorf("signal of an unknown exec: %v %q", err, out)
			}
			if out, err := signal("exec-one", "TERM"); err != nil || out != "signalled" {
				t.Fatalf("signal: %v %q", err, out)
			}
			if err := cmd.Wait(); err == nil {
				t.Errorf("the exec exited 0 after SIGTERM")
			}
			cb, _ := os.ReadFile(child)
			cpid, _ := strconv.Atoi(strings.TrimSpace(string(cb)))
			waitExec(t, func() bool { return processEnded(cpid) })
			if out, err := signal("exec-one", "KILL"); err != nil || out != "gone" {
				t.Errorf("signal of an ended exec: %v %q, want gone", err, out)
			}
			if _, err := os.Stat(ExecPIDFile(pids, "exec-one")); !os.IsNotExist(err) {
				t.Errorf("the PID file of an ended exec stays: %v", err)
			}
			// A record whose process is gone is pruned by the next exec; one
			// that names a live process of another start is not signalled.
			if err := os.WriteFile(ExecPIDFile(pids, "exec-stale"), []byte("999999 1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ExecPIDFile(pids, "exec-reused"), []byte(strconv.Itoa(os.Getpid())+" 1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := signal("exec-reused", "TERM"); err != nil || out != "gone" {
				t.Errorf("signal of a record whose PID another process has: %v %q, want gone", err, out)
			}
			two := start("exec-two", "sleep 300")
			waitExec(t, func() bool { _, err := os.Stat(ExecPIDFile(pids, "exec-two")); return err == nil })
			if _, err := os.Stat(ExecPIDFile(pids, "exec-stale")); !os.IsNotExist(err) {
				t.Errorf("a stale PID file was not pruned: %v", err)
			}
			if out, err := signal("exec-two", "KILL"); err != nil || out != "signalled" {
				t.Fatalf("signal: %v %q", err, out)
			}
			_ = two.Wait()
		})
	}
}

func fileHas(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && len(strings.TrimSpace(string(b))) > 0
}

func waitExec(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
