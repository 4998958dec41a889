package supervisor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestStatusCloseWaitsForFollower: the stream ends with supervisor.exiting, and
// close waits until the follower reports it read everything, so the host needs no
// read of the stopped container.
func TestStatusCloseWaitsForFollower(t *testing.T) {
	dir := t.TempDir()
	s, err := openStatus(filepath.Join(dir, "status.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	s.readFile = filepath.Join(dir, "status.read")
	s.emit(StatusEvent{Kind: KindSupervisorReady})
	// The follower attached: it reported an offset.
	if err := os.WriteFile(s.readFile, []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	var reported atomic.Bool
	go func() {
		// A follower that reads the whole stream, then reports.
		for {
			b, _ := os.ReadFile(filepath.Join(dir, "status.jsonl"))
			if strings.Contains(string(b), KindSupervisorExiting) {
				reported.Store(true)
				_ = os.WriteFile(s.readFile, []byte(strconv.Itoa(len(b))), 0o644)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	s.close()
	if !reported.Load() {
		t.Fatal("close returned before the follower reported the whole stream")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "status.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if !strings.Contains(lines[len(lines)-1], KindSupervisorExiting) {
		t.Errorf("the stream's last line is %s, want %s", lines[len(lines)-1], KindSupervisorExiting)
	}
}

// TestStatusCloseWithoutFollower: nobody follows (no report), close does not wait.
func TestStatusCloseWithoutFollower(t *testing.T) {
	dir := t.TempDir()
	s, err := openStatus(filepath.Join(dir, "status.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	s.readFile = filepath.Join(dir, "status.read")
	done := make(chan struct{})
	go func() { s.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close hangs without a follower")
	}
}
