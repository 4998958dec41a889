package proc

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Ended: a running process is not; a killed one is, as a zombie not yet
// reaped and once gone.
func TestEndedOfRunningZombieAndGone(t *testing.T) {
	if Ended(os.Getpid()) {
		t.Fatal("this process reads as ended")
	}
	cmd := exec.Command("sleep", "100")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if Ended(pid) {
		t.Fatalf("sleeping pid %d reads as ended", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for st, _, _ := State(pid); st != "Z"; st, _, _ = State(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never became a zombie (state %q)", pid, st)
		}
		time.Sleep(time.Millisecond)
	}
	if !Ended(pid) {
		t.Errorf("zombie pid %d does not read as ended", pid)
	}
	_ = cmd.Wait()
	if !Ended(pid) {
		t.Errorf("reaped pid %d does not read as ended", pid)
	}
	if Ended(0) {
		t.Error("pid 0 reads as ended")
	}
}

// A thread is ended when the kernel says it is a zombie or in its exit
// (PF_EXITING in its flags), whatever its command's name holds.
func TestThreadEnded(t *testing.T) {
	for _, c := range []struct {
		stat string
		want bool
	}{
		{"12 (sleep) S 1 12 12 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 99 0 0", false},
		{"12 (tail) D 1 12 12 0 -1 4194564 100 0 0 0 0 0 0 0 20 0 1 0 99 0 0", true}, // 0x400104: exiting, in the teardown
		{"12 (a) Z) R 1 12 12 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 99 0 0", false},  // the name's ") Z" is not the state
		{"12 (a) Z 1 12 12 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 99 0 0", true},
		{"12 (a) X 1 12 12 0 -1 0 1", true},
		{"12 (a) R 1 12", false}, // cut short
		{"garbage", false},
	} {
		if got := threadEnded(c.stat); got != c.want {
			t.Errorf("threadEnded(%q) = %v, want %v", c.stat, got, c.want)
		}
	}
}
