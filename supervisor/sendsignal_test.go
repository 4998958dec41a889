package supervisor

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{
		"TERM": syscall.SIGTERM, "SIGTERM": syscall.SIGTERM, "int": syscall.SIGINT,
		"SigHup": syscall.SIGHUP, "15": syscall.SIGTERM, "10": syscall.Signal(10), "64": syscall.Signal(64),
		"WINCH": syscall.SIGWINCH, "USR1": syscall.SIGUSR1,
	} {
		got, err := ParseSignal(in)
		if err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-15", "65", "TERMINATE", "SIG", "15x"} {
		if got, err := ParseSignal(in); err == nil || !strings.HasPrefix(err.Error(), "cannot use signal") {
			t.Errorf("ParseSignal(%q) = %v, %v; want a refusal", in, got, err)
		}
	}
}

// TestSignalInitRefusesKill: SIGKILL and SIGSTOP, which the kernel would drop,
// are refused before anything is sent.
func TestSignalInitRefusesKill(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP} {
		if err := SignalInit(sig); err == nil || !strings.Contains(err.Error(), "drops it") {
			t.Errorf("SignalInit(%v): %v, want a refusal", sig, err)
		}
	}
}

// TestSendSignal: the signal reaches the process; a process that is not there
// is an error naming it.
func TestSendSignal(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if err := sendSignal(cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("sleep ended with %v", err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("sleep ended with %v, want killed by SIGTERM", ws)
	}
	err = sendSignal(cmd.Process.Pid, syscall.SIGTERM)
	if err == nil || !strings.Contains(err.Error(), "cannot send SIGTERM to process") {
		t.Fatalf("signalling a reaped process: %v, want an error", err)
	}
}
