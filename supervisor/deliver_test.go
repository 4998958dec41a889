package supervisor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/test/testenv"
)

// TestDeliverReachesReceiver: the values written to deliver's stdin reach the
// receiver listening on the socket, which then removes the socket.
func TestDeliverReachesReceiver(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "secrets.sock")
	got := make(chan *Secrets, 1)
	errs := make(chan error, 1)
	go func() {
		s, err := ReceiveSecrets(sock, 10*time.Second)
		got <- s
		errs <- err
	}()
	// Deliver waits for the receiver's socket to appear.
	if err := Deliver(sock, strings.NewReader(`{"env.TOKEN":"s3cret"}`), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if s.values["env.TOKEN"] != "s3cret" {
		t.Fatalf("received %v", s)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket %s remains after the delivery (%v)", sock, err)
	}
}

// TestDeliverRefusedKeepsWaiting: a delivery that is not a JSON object of strings
// is refused without quoting it, and the receiver takes the next, good one.
func TestDeliverRefusedKeepsWaiting(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	got := make(chan *Secrets, 1)
	go func() {
		s, _ := ReceiveSecrets(sock, 10*time.Second)
		got <- s
	}()
	err := Deliver(sock, strings.NewReader(`["leaked-value"]`), 10*time.Second)
	if err == nil || strings.Contains(err.Error(), "leaked-value") {
		t.Fatalf("a bad delivery: want a refusal that does not quote it, got %v", err)
	}
	if err := Deliver(sock, strings.NewReader(`{"k":"v"}`), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.values["k"] != "v" {
		t.Fatalf("received %v", s)
	}
}

// TestReceiveTimesOut: no delivery within the timeout is an error naming it.
func TestReceiveTimesOut(t *testing.T) {
	_, err := ReceiveSecrets(filepath.Join(t.TempDir(), "s.sock"), 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "none delivered") {
		t.Fatalf("want a timeout error, got %v", err)
	}
}

// TestDeliverWithoutReceiver: nothing listening is an error within the timeout.
func TestDeliverWithoutReceiver(t *testing.T) {
	err := Deliver(filepath.Join(t.TempDir(), "none.sock"), strings.NewReader(`{}`), 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "nothing listens") {
		t.Fatalf("want an error, got %v", err)
	}
}

// TestTailFollows: tail writes its header, the file from an offset, then what is
// appended, until its context ends.
func TestTailFollows(t *testing.T) {
	p := filepath.Join(t.TempDir(), "status.jsonl")
	if err := os.WriteFile(p, []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out testenv.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Tail(ctx, TailOptions{Path: p, From: 4, Follow: true, Out: &out, Poll: time.Millisecond})
	}()
	waitFor(t, func() bool { return out.String() == TailHeader+"two\n" })
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("three\n")
	f.Close()
	waitFor(t, func() bool { return out.String() == TailHeader+"two\nthree\n" })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestTailRefusesFIFO: a FIFO planted in place of a state file is refused at
// once instead of blocking the reader.
func TestTailRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "status.jsonl")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := Tail(context.Background(), TailOptions{Path: p, Follow: true, Out: &out})
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("want a refusal, got %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
