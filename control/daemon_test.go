package control_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestSingleton: a second daemon exits non-zero at once and leaves the first
// alone; socket mode, pid and version files; status and stop.
func TestSingleton(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	sock := e.paths.Socket()
	st, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode = %v, want a socket with mode 0600", st.Mode())
	}
	daemonDir := filepath.Join(e.data, "airlock", "daemon")
	if b, err := os.ReadFile(filepath.Join(daemonDir, "airlockd.pid")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(d.pid) {
		t.Errorf("pid file = %q (%v), want %d", b, err, d.pid)
	}
	if b, err := os.ReadFile(filepath.Join(daemonDir, "airlockd.version")); err != nil || strings.TrimSpace(string(b)) != buildA {
		t.Errorf("version file = %q (%v), want %s", b, err, buildA)
	}

	start := time.Now()
	second := e.spawnDaemon(binA)
	code, ok := second.exited(10 * time.Second)
	if !ok {
		t.Fatalf("a second daemon still runs after 10 s\n%s", second.out)
	}
	if code == 0 {
		t.Errorf("a second daemon exited 0, want non-zero\n%s", second.out)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a second daemon took %v to give up", took)
	}
	if !strings.Contains(second.out.String(), "another airlock daemon is running") {
		t.Errorf("the second daemon's output does not say why:\n%s", second.out)
	}
	st2, err := os.Stat(sock)
	if err != nil || !os.SameFile(st, st2) {
		t.Errorf("the first daemon's socket was disturbed: %v", err)
	}
	h, err := d.client.Health(ctxT(t, 5*time.Second))
	if err != nil || h.PID != d.pid {
		t.Fatalf("the first daemon no longer answers: %+v %v", h, err)
	}

	logPath := filepath.Join(daemonDir, "airlockd.log")
	// The first line, then the listeners and the Engine in use.
	engineHost := "unix:///var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		engineHost = h // the tests' Engine (make test-engine29)
	}
	engineLines := "Listening on: " + sock + "\nEngine: " + engineHost + "\nServing sandboxes on: " + engineHost + "\n"
	r := e.run(binA, "daemon", "status")
	if want := fmt.Sprintf("Daemon running (PID %d, build %s, logs: %s)\n", d.pid, buildA, logPath) + engineLines; r.Code != 0 || r.Stdout != want {
		t.Errorf("daemon status = %q, want %q\n%s", r.Stdout, want, r)
	}
	r = e.run(binB, "daemon", "status")
	if want := fmt.Sprintf("Daemon running (PID %d, build %s, logs: %s) [outdated, restart recommended]\n", d.pid, buildA, logPath) + engineLines; r.Code != 0 || r.Stdout != want {
		t.Errorf("daemon status of another build = %q, want %q\n%s", r.Stdout, want, r)
	}

	r = e.run(binA, "daemon", "stop")
	if r.Code != 0 || r.Stdout != fmt.Sprintf("Daemon stopped (PID %d)\n", d.pid) {
		t.Errorf("daemon stop: %s", r)
	}
	if code, ok := d.exited(5 * time.Second); !ok || code != 0 {
		t.Errorf("after daemon stop the daemon exited=%v code=%d\n%s", ok, code, d.out)
	}
	for _, f := range []string{sock, filepath.Join(daemonDir, "airlockd.pid"), filepath.Join(daemonDir, "airlockd.version")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s remains after the daemon stopped (%v)", f, err)
		}
	}
	r = e.run(binA, "daemon", "status")
	if r.Code == 0 || !strings.HasPrefix(r.Stdout, "Daemon not running") {
		t.Errorf("daemon status with no daemon: %s", r)
	}
}

// TestStopKillsStubbornDaemon: a daemon that ignores SIGTERM (and so no longer
// answers health) is SIGKILLed after 5 s. A fake daemon stands in: a shell that
// holds the singleton lock, ignores SIGTERM and is named in the pid file.
func TestStopKillsStubbornDaemon(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	if err := os.MkdirAll(e.paths.RuntimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	fake := exec.Command("sh", "-c", `exec 9<>"$1"; flock -xn 9 || exit 3; trap "" TERM; echo ok; while :; do sleep 1 9>&-; done`, "sh", e.paths.Lock())
	out, err := fake.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 3)
		_, _ = io.ReadFull(out, buf) // the trap is set
		done <- fake.Wait()
	}()
	t.Cleanup(func() { _ = fake.Process.Kill() })
	// Wait for the trap before signalling.
	eventually(t, 5*time.Second, "the fake daemon to set its trap", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", fake.Process.Pid))
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "SigIgn:"); ok {
				n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				return n&(1<<(uint(syscall.SIGTERM)-1)) != 0
			}
		}
		return false
	})
	dir := filepath.Join(e.data, "airlock", "daemon")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "airlockd.pid"), []byte(strconv.Itoa(fake.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := e.run(binA, "daemon", "stop")
	took := time.Since(start)
	if r.Code != 0 {
		t.Errorf("daemon stop: %s", r)
	}
	select {
	case err := <-done:
		ws, _ := fake.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("the stubborn daemon ended with %v, want SIGKILL", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the stubborn daemon still runs after daemon stop")
	}
	if took < 5*time.Second || took > 9*time.Second {
		t.Errorf("daemon stop took %v, want about 5 s (SIGTERM, then SIGKILL after 5 s)", took)
	}
}

// get does GET url with an Authorization header (none when auth is "").
func get(t *testing.T, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t, 10*time.Second), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTCPListener: token required (Bearer or Token), --unsafe-no-token, and
// --host without either refused.
func TestTCPListener(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	port := freePort(t)
	d := e.startDaemon(binA, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--token", "s3cret")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	eventually(t, 10*time.Second, "the TCP listener", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	for _, auth := range []string{"", "Bearer wrong", "Token wrong", "Basic s3cret", "Bearer ", "s3cret"} {
		code, body := get(t, base+"/v1/health", auth)
		var ce struct {
			Reason string `json:"reason"`
		}
		if code != http.StatusUnauthorized || json.Unmarshal([]byte(body), &ce) != nil || ce.Reason != "unauthorized" {
			t.Errorf("Authorization %q: %d %s, want 401 {\"reason\":\"unauthorized\"}", auth, code, body)
		}
	}
	code, body := get(t, base+"/v1/sandboxes/nope", "")
	if code != http.StatusUnauthorized || !strings.Contains(body, `"reason":"unauthorized"`) {
		t.Errorf("an API call without a token: %d %s", code, body)
	}
	for _, auth := range []string{"Bearer s3cret", "Token s3cret"} {
		code, body := get(t, base+"/v1/health", auth)
		var h client.Health
		if code != http.StatusOK || json.Unmarshal([]byte(body), &h) != nil || h.PID != d.pid {
			t.Errorf("Authorization %q: %d %s, want 200 and the daemon's health", auth, code, body)
		}
	}
	if h, err := client.NewTCP(fmt.Sprintf("127.0.0.1:%d", port), "s3cret").Health(ctxT(t, 5*time.Second)); err != nil || h.BuildID != buildA {
		t.Errorf("client.NewTCP with the token: %+v %v", h, err)
	}
	_, err := client.NewTCP(fmt.Sprintf("127.0.0.1:%d", port), "").List(ctxT(t, 5*time.Second), nil)
	if apiReason(err) != client.ReasonUnauthorized {
		t.Errorf("client.NewTCP without the token: %v, want reason unauthorized", err)
	}
	// The Unix socket needs no token.
	if _, err := d.client.List(ctxT(t, 5*time.Second), nil); err != nil {
		t.Errorf("the Unix socket: %v", err)
	}
	d.stop(t, syscall.SIGTERM)

	// --unsafe-no-token accepts without.
	e2 := newEnv(t)
	port2 := freePort(t)
	e2.startDaemon(binA, "--host", "127.0.0.1", "--port", strconv.Itoa(port2), "--unsafe-no-token")
	eventually(t, 10*time.Second, "the TCP listener", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port2))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if code, body := get(t, fmt.Sprintf("http://127.0.0.1:%d/v1/sandboxes", port2), ""); code != http.StatusOK || strings.TrimSpace(body) != "[]" {
		t.Errorf("--unsafe-no-token without a token: %d %s", code, body)
	}

	// --host without a token or --unsafe-no-token refuses to start.
	e3 := newEnv(t)
	bad := e3.spawnDaemon(binA, "--host", "127.0.0.1", "--port", strconv.Itoa(freePort(t)))
	code3, ok := bad.exited(10 * time.Second)
	if !ok || code3 == 0 {
		t.Errorf("--host without a token: exited=%v code=%d, want a non-zero exit\n%s", ok, code3, bad.out)
	}
	if !strings.Contains(bad.out.String(), "token") {
		t.Errorf("--host without a token: the error does not mention the token:\n%s", bad.out)
	}
	if _, err := os.Stat(e3.paths.Socket()); !os.IsNotExist(err) {
		t.Errorf("a daemon that refused to start left its socket (%v)", err)
	}
	if _, err := client.New(e3.paths.Socket()).Health(context.Background()); err == nil {
		t.Errorf("a daemon that refused to start answers")
	}
}
