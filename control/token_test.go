package control_test

// The TCP token (issue 10): never on a command line or in a daemon's
// environment, read only from a file of the user's own, kept across an upgrade.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/daemonfiles"
)

// waitTCP waits for a TCP listener on 127.0.0.1:port.
func waitTCP(t *testing.T, port int) {
	t.Helper()
	eventually(t, 10*time.Second, "the TCP listener", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// tcpHealth checks that the daemon on port wants token (and refuses a wrong
// one), and returns its pid.
func tcpHealth(t *testing.T, port int, token string) int {
	t.Helper()
	base := fmt.Sprintf("http://127.0.0.1:%d/v1/health", port)
	if code, body := get(t, base, "Bearer wrong-token"); code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d %s, want 401", code, body)
	}
	code, body := get(t, base, "Bearer "+token)
	var h client.Health
	if code != http.StatusOK || json.Unmarshal([]byte(body), &h) != nil {
		t.Fatalf("the token: %d %s, want 200", code, body)
	}
	return h.PID
}

func procFile(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeTokenFile(t *testing.T, path, token string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestTokenNeverOnArgv: the token comes from AIRLOCK_TOKEN; the daemon the CLI
// starts in the background has it neither on its command line nor in its
// environment, and its environment is minimal: no vault passphrase, nothing
// the CLI's shell held beyond what a daemon needs (design.md §8).
func TestTokenNeverOnArgv(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.stopBackgroundDaemon()
	port := freePort(t)
	const token = "tok-from-env-5e1d7c"
	r := e.runEnv(binA, []string{"AIRLOCK_TOKEN=" + token, "AIRLOCK_VAULT_PASSPHRASE=vault-pass-9f2b",
		"AIRLOCK_TEST_MARKER=marker-3a4c", "LC_TIME=C.UTF-8"},
		"daemon", "start", "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	if r.Code != 0 {
		t.Fatalf("daemon start: %s", r)
	}
	pid := e.health().PID
	waitTCP(t, port)
	if got := tcpHealth(t, port, token); got != pid {
		t.Errorf("TCP health pid %d, want %d", got, pid)
	}
	cmdline := procFile(t, pid, "cmdline")
	if strings.Contains(cmdline, token) {
		t.Errorf("the token is on the daemon's command line: %q", cmdline)
	}
	environ := procFile(t, pid, "environ")
	for _, bad := range []string{"AIRLOCK_TOKEN", token, "AIRLOCK_VAULT_PASSPHRASE", "vault-pass-9f2b", "AIRLOCK_TEST_MARKER", "marker-3a4c", "NO_COLOR"} {
		if strings.Contains(environ, bad) {
			t.Errorf("the daemon's environment has %s:\n%s", bad, strings.ReplaceAll(environ, "\x00", "\n"))
		}
	}
	for _, want := range []string{"HOME=" + e.home, "XDG_DATA_HOME=" + e.data, "XDG_RUNTIME_DIR=" + e.runtime, "PATH=", "LC_TIME=C.UTF-8", "AIRLOCK_DAEMON_BACKGROUND=1"} {
		if !strings.Contains("\x00"+environ, "\x00"+want) {
			t.Errorf("the daemon's environment lacks %s:\n%s", want, strings.ReplaceAll(environ, "\x00", "\n"))
		}
	}
	// The hand-off file is gone; the listen options are kept, mode 0600.
	if _, err := os.Stat(daemonfiles.TokenHandoffFile(e.paths)); !os.IsNotExist(err) {
		t.Errorf("the token hand-off file remains (%v)", err)
	}
	listen := filepath.Join(e.paths.DaemonDir(), "airlockd.listen")
	if st, err := os.Stat(listen); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v %v, want mode 0600", listen, st, err)
	}
	// The token is not in the daemon's log.
	if b, _ := os.ReadFile(daemonfiles.LogFile(e.paths)); strings.Contains(string(b), token) {
		t.Errorf("the daemon's log shows the token:\n%s", b)
	}
}

// TestTokenFile: --token-file is read by the daemon when it is a regular file
// of the user's with mode 0600, and refused (exit 2, saying why) otherwise;
// --token still works, with a warning.
func TestTokenFile(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	bad := filepath.Join(e.home, "loose-token")
	writeTokenFile(t, bad, "loose-token-value", 0o644)
	r := e.run(binA, "daemon", "run", "--host", "127.0.0.1", "--port", strconv.Itoa(freePort(t)), "--token-file", bad)
	if r.Code != 2 || !strings.Contains(r.Stderr, bad) || !strings.Contains(r.Stderr, "mode 0644") || !strings.Contains(r.Stderr, "0600") {
		t.Errorf("a token file with mode 0644: %s", r)
	}
	r = e.run(binA, "daemon", "start", "--host", "127.0.0.1", "--port", strconv.Itoa(freePort(t)), "--token-file", e.home)
	if r.Code != 2 || !strings.Contains(r.Stderr, "not a regular file") {
		t.Errorf("a directory as token file: %s", r)
	}
	if _, err := client.New(e.paths.Socket()).Health(context.Background()); err == nil {
		t.Fatalf("a daemon started with a refused token file")
	}

	good := filepath.Join(e.home, "token")
	writeTokenFile(t, good, "file-token-77aa", 0o600)
	port := freePort(t)
	d := e.startDaemon(binA, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--token-file", good)
	waitTCP(t, port)
	if got := tcpHealth(t, port, "file-token-77aa"); got != d.pid {
		t.Errorf("TCP health pid %d, want %d", got, d.pid)
	}
	if strings.Contains(d.out.String(), "warning") {
		t.Errorf("--token-file warned:\n%s", d.out)
	}
	d.stop(t, syscall.SIGTERM)

	port = freePort(t)
	d = e.startDaemon(binA, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--token", "flag-token-1234")
	waitTCP(t, port)
	tcpHealth(t, port, "flag-token-1234")
	if !strings.Contains(d.out.String(), "warning: --token puts the token on the command line") {
		t.Errorf("--token did not warn:\n%s", d.out)
	}
}

// TestReadTokenFile: the checks of a token file.
func TestReadTokenFile(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	writeTokenFile(t, good, "  tok-123 ", 0o600)
	if tok, err := daemonfiles.ReadTokenFile(good); err != nil || tok != "tok-123" {
		t.Errorf("a 0600 file: %q %v", tok, err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o666} {
		p := filepath.Join(dir, fmt.Sprintf("m%o", mode))
		writeTokenFile(t, p, "tok", mode)
		if _, err := daemonfiles.ReadTokenFile(p); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("mode %04o", mode)) {
			t.Errorf("mode %04o: %v, want a refusal naming the mode", mode, err)
		}
	}
	empty := filepath.Join(dir, "empty")
	writeTokenFile(t, empty, "", 0o600)
	if _, err := daemonfiles.ReadTokenFile(empty); err == nil {
		t.Errorf("an empty token file was accepted")
	}
	if os.Getuid() == 0 {
		theirs := filepath.Join(dir, "theirs")
		writeTokenFile(t, theirs, "tok", 0o600)
		if err := os.Chown(theirs, 4243, 4243); err != nil {
			t.Fatal(err)
		}
		if _, err := daemonfiles.ReadTokenFile(theirs); err == nil || !strings.Contains(err.Error(), "uid 4243") {
			t.Errorf("another user's file: %v, want a refusal naming its owner", err)
		}
	}
}

// TestUpgradeKeepsListenOptions: a daemon replaced by a CLI of another build
// comes back with its TCP listener and token, whether the token came from a
// file or by value.
func TestUpgradeKeepsListenOptions(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.stopBackgroundDaemon()
	tokFile := filepath.Join(e.home, "token")
	writeTokenFile(t, tokFile, "upgrade-file-token", 0o600)
	port := freePort(t)
	if r := e.run(binA, "daemon", "start", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--token-file", tokFile); r.Code != 0 {
		t.Fatalf("daemon start: %s", r)
	}
	// upgraded checks that build B now answers, in another process than
	// first, on port with token.
	upgraded := func(first client.Health, port int, token string) client.Health {
		t.Helper()
		second := e.health()
		if second.BuildID != buildB || second.PID == first.PID {
			t.Fatalf("after the upgrade: %+v (before %+v)", second, first)
		}
		waitTCP(t, port)
		if got := tcpHealth(t, port, token); got != second.PID {
			t.Errorf("TCP health after the upgrade: pid %d, want %d", got, second.PID)
		}
		return second
	}
	first := e.health()
	waitTCP(t, port)
	tcpHealth(t, port, "upgrade-file-token")

	r := e.run(binB, "ps")
	if r.Code != 0 || !strings.Contains(r.Stderr, fmt.Sprintf("daemon outdated (build %s -> %s), restarting...", buildA, buildB)) {
		t.Fatalf("ps with a newer CLI: %s", r)
	}
	second := upgraded(first, port, "upgrade-file-token")
	if cmd := procFile(t, second.PID, "cmdline"); !strings.Contains(cmd, tokFile) {
		t.Errorf("the new daemon does not read the token file: %q", cmd)
	}

	// A token given by value survives too, and stays off the command line.
	if r := e.run(binB, "daemon", "stop"); r.Code != 0 {
		t.Fatalf("daemon stop: %s", r)
	}
	port = freePort(t)
	if r := e.runEnv(binA, []string{"AIRLOCK_TOKEN=upgrade-value-token"}, "daemon", "start", "--host", "127.0.0.1", "--port", strconv.Itoa(port)); r.Code != 0 {
		t.Fatalf("daemon start: %s", r)
	}
	first = e.health()
	r = e.run(binB, "daemon", "start")
	if r.Code != 0 || !strings.Contains(r.Stderr, "daemon outdated") {
		t.Fatalf("daemon start with a newer CLI: %s", r)
	}
	second = upgraded(first, port, "upgrade-value-token")
	if cmd := procFile(t, second.PID, "cmdline") + procFile(t, second.PID, "environ"); strings.Contains(cmd, "upgrade-value-token") {
		t.Errorf("the new daemon has the token on its command line or in its environment")
	}
}
