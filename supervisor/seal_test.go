package supervisor

import (
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestDeadProcess: a process that ended and waits for its parent to reap it
// counts as dead (a sealed end need not wait for a runtime outside the
// sandbox to reap what it killed); a running one, or one that is gone, as
// running and dead.
func TestDeadProcess(t *testing.T) {
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	if dead(strconv.Itoa(sleeper.Process.Pid)) {
		t.Errorf("a running sleep counts as dead")
	}
	quick := exec.Command("true")
	if err := quick.Start(); err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(quick.Process.Pid)
	// Not reaped: a zombie once it ended.
	deadline := time.Now().Add(10 * time.Second)
	for !dead(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("an ended, unreaped process never counted as dead")
		}
		time.Sleep(time.Millisecond)
	}
	if err := quick.Wait(); err != nil {
		t.Fatal(err)
	}
	if !dead(pid) {
		t.Errorf("a reaped (gone) process counts as running")
	}
}
