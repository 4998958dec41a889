package control_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDaemonStartListenFlagsNotApplied: `daemon start --host --port
// --token-file` while a socket-only daemon of the same build runs does not
// claim success: it says the flags were not applied and how to restart, exits
// 1, and `daemon status` shows every listener (the socket, and TCP once the
// daemon was started with it).
func TestDaemonStartListenFlagsNotApplied(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.stopBackgroundDaemon()
	if r := e.run(binA, "daemon", "start"); r.Code != 0 {
		t.Fatalf("daemon start: %s", r)
	}
	sock := e.paths.Socket()
	r := e.run(binA, "daemon", "status")
	if r.Code != 0 || !strings.Contains(r.Stdout, "Listening on: "+sock+"\n") {
		t.Errorf("daemon status of a socket-only daemon: %s; want Listening on: %s", r, sock)
	}

	tokenFile := filepath.Join(e.home, "token")
	writeTokenFile(t, tokenFile, "listen-token-2b7c", 0o600)
	port := strconv.Itoa(freePort(t))
	pid := e.health().PID
	r = e.run(binA, "daemon", "start", "--host", "127.0.0.1", "--port", port, "--token-file", tokenFile)
	if r.Code != 1 || !strings.Contains(r.Stderr, "not applied") || !strings.Contains(r.Stderr, "--host 127.0.0.1 --port "+port) ||
		!strings.Contains(r.Stderr, "airlock daemon stop") || strings.Contains(r.Stdout, "Daemon running") {
		t.Errorf("daemon start with listen flags beside a socket-only daemon: %s; want exit 1, saying the flags were not applied and how to restart", r)
	}
	if h := e.health(); h.PID != pid {
		t.Errorf("the running daemon was replaced (pid %d -> %d)", pid, h.PID)
	}
	// The same options again are what runs: a no-op.
	if r := e.run(binA, "daemon", "start"); r.Code != 0 || !strings.Contains(r.Stdout, "Daemon running") {
		t.Errorf("daemon start without flags: %s", r)
	}

	// Restarted as told: the TCP listener is there, and status shows it.
	if r := e.run(binA, "daemon", "stop"); r.Code != 0 {
		t.Fatalf("daemon stop: %s", r)
	}
	if r := e.run(binA, "daemon", "start", "--host", "127.0.0.1", "--port", port, "--token-file", tokenFile); r.Code != 0 {
		t.Fatalf("daemon start with TCP: %s", r)
	}
	waitTCP(t, mustAtoi(t, port))
	r = e.run(binA, "daemon", "status")
	want := fmt.Sprintf("Listening on: %s, tcp://127.0.0.1:%s (token from %s)\n", sock, port, tokenFile)
	if r.Code != 0 || !strings.Contains(r.Stdout, want) {
		t.Errorf("daemon status: %s; want %q", r, want)
	}
	// The same flags again: a no-op, no complaint.
	if r := e.run(binA, "daemon", "start", "--host", "127.0.0.1", "--port", port, "--token-file", tokenFile); r.Code != 0 || r.Stderr != "" {
		t.Errorf("daemon start with the running daemon's own flags: %s", r)
	}
	// Other flags beside a TCP daemon: not applied either.
	r = e.run(binA, "daemon", "start", "--host", "127.0.0.1", "--port", strconv.Itoa(freePort(t)), "--token-file", tokenFile)
	if r.Code != 1 || !strings.Contains(r.Stderr, "not applied") {
		t.Errorf("daemon start with another port: %s", r)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
