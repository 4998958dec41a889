package control_test

// Security hardening of the daemon's files, tokens, environment, pid file and
// log (issue 10): each test fails on the code as it was before.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control"
	"github.com/airlock-dev/airlock/daemonfiles"
	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/secrets"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

// runEnv runs the CLI bin with args in the project dir, with extra variables
// added to the test's environment.
func (e *env) runEnv(bin string, extra []string, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = e.project
	cmd.Env = append(e.environ(), extra...)
	cmd.WaitDelay = 5 * time.Second
	return clitest.RunCmd(e.t, cmd)
}

// stopBackgroundDaemon stops, when the test ends, whatever daemon answers on
// the test's socket (one a CLI started in the background).
func (e *env) stopBackgroundDaemon() {
	e.t.Cleanup(func() {
		h, err := client.New(e.paths.Socket()).Health(context.Background())
		if err != nil {
			return
		}
		if p, err := os.FindProcess(h.PID); err == nil {
			_ = p.Signal(syscall.SIGTERM)
			for i := 0; i < 250 && syscall.Kill(h.PID, 0) == nil; i++ {
				time.Sleep(20 * time.Millisecond)
			}
			_ = p.Kill()
		}
	})
}

// health returns the health of the daemon on the test's socket.
func (e *env) health() client.Health {
	e.t.Helper()
	h, err := client.New(e.paths.Socket()).Health(ctxT(e.t, 5*time.Second))
	if err != nil {
		e.t.Fatalf("no daemon answers: %v", err)
	}
	return *h
}

// TestStopStalePidFile: a pid file naming a process that is not the daemon (a
// reused pid) is removed; that process is not signalled.
func TestStopStalePidFile(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	sleep := exec.Command("sleep", "300")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = sleep.Wait(); close(done) }()
	t.Cleanup(func() { _ = sleep.Process.Kill(); <-done })
	dir := e.paths.DaemonDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	pidPath := filepath.Join(dir, "airlockd.pid")
	if err := os.WriteFile(pidPath, []byte(strconv.Itoa(sleep.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.run(binA, "daemon", "stop")
	if r.Code != 0 || r.Stdout != "no daemon running; removed a stale pid file\n" {
		t.Errorf("daemon stop with a stale pid file: %s", r)
	}
	select {
	case <-done:
		t.Fatalf("daemon stop killed the process the stale pid file named (%v)", sleep.ProcessState)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := os.Stat(pidPath); !os.IsNotExist(err) {
		t.Errorf("the stale pid file remains (%v)", err)
	}
	r = e.run(binA, "daemon", "stop")
	if r.Code != 0 || r.Stdout != "Daemon not running\n" {
		t.Errorf("daemon stop with no pid file: %s", r)
	}

	// A daemon started over a stale pid file (its pid alive) takes it over.
	if err := os.WriteFile(pidPath, []byte(strconv.Itoa(sleep.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := e.startDaemon(binA)
	if b, err := os.ReadFile(pidPath); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(d.pid) {
		t.Errorf("pid file = %q (%v), want %d", b, err, d.pid)
	}
	if st, err := os.Stat(pidPath); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("pid file mode: %v %v, want 0600", st, err)
	}
}

// TestDaemonLogMasksEscapedSecrets: a multi-line PEM-like secret with quotes,
// backslashes and tabs, logged through the daemon's logger, is masked in the
// log file and its copy on stderr — also in the JSON-escaped form the encoder
// writes.
func TestDaemonLogMasksEscapedSecrets(t *testing.T) {
	parallel(t)
	root := t.TempDir()
	p, err := paths.FromEnv(func(k string) (string, bool) {
		switch k {
		case "HOME":
			return root, true
		case "XDG_DATA_HOME":
			return filepath.Join(root, "data"), true
		case "XDG_CONFIG_HOME":
			return filepath.Join(root, "config"), true
		case "XDG_RUNTIME_DIR":
			return filepath.Join(root, "rt"), true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	const pem = "-----BEGIN OPENSSH PRIVATE KEY-----\n" +
		"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\t\"quoted\" back\\slash\n" +
		"QyNTUxOQAAACBhZ2VudC10ZXN0LWtleS1kYXRhLXh4eA\n" +
		"-----END OPENSSH PRIVATE KEY-----"
	r := secrets.NewRedactor()
	r.Add(pem)
	var stderr bytes.Buffer
	err = control.Run(context.Background(), control.Options{
		Paths: p, BuildID: "redact", Redactor: r, Stderr: &stderr,
		Service: func() (*control.Service, error) {
			return nil, errors.New("cannot use the key " + pem)
		},
	})
	if err == nil {
		t.Fatal("control.Run started with a failing service")
	}
	b, err := os.ReadFile(daemonfiles.LogFile(p))
	if err != nil {
		t.Fatal(err)
	}
	esc, _ := json.Marshal(pem)
	for what, out := range map[string]string{"log file": string(b), "stderr": stderr.String()} {
		if !strings.Contains(out, "cannot start") || !strings.Contains(out, "cannot use the key "+secrets.Mask) {
			t.Errorf("the %s lacks the masked error:\n%s", what, out)
		}
		for _, leak := range []string{pem, strings.Trim(string(esc), `"`), "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", "QyNTUxOQAAACBhZ2VudC10ZXN0LWtleS1kYXRhLXh4eA"} {
			if strings.Contains(out, leak) {
				t.Errorf("the %s shows the secret (%q):\n%s", what, leak, out)
			}
		}
	}
}

// TestRuntimeDirOfAnotherUser: without XDG_RUNTIME_DIR, a /tmp/airlock-<uid>
// that another local user made first (or a link, or a directory others may
// write to) is refused before anything starts: exit 125 and an error naming
// the directory and its owner. The user is a uid with no account, run through
// setpriv; the other user is another such uid.
func TestRuntimeDirOfAnotherUser(t *testing.T) {
	// Not beside other tests: it plays two other users in the shared /tmp.
	if os.Getuid() != 0 {
		t.Skip("needs root to act as two other users")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	uid := 4242
	for ; uid < 4342; uid += 2 {
		if _, err := os.Lstat(fmt.Sprintf("/tmp/airlock-%d", uid)); os.IsNotExist(err) {
			break
		}
	}
	attacker := uid + 1
	rtDir := fmt.Sprintf("/tmp/airlock-%d", uid)
	t.Cleanup(func() { os.RemoveAll(rtDir) })

	// A binary and a home the user can reach.
	root, err := os.MkdirTemp("", "airlock-uid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "airlock")
	testenv.CopyFile(t, binA, bin, 0o755)
	// mkdirOf makes dir with mode (umask aside), owned by owner.
	mkdirOf := func(dir string, mode os.FileMode, owner int) {
		t.Helper()
		if err := os.Mkdir(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, owner, owner); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(root, "home")
	mkdirOf(home, 0o700, uid)
	run := func(args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, setpriv, append([]string{"--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(uid), "--clear-groups", bin}, args...)...)
		cmd.Dir = home
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "USER=nobody4242"}
		return clitest.RunCmd(t, cmd)
	}
	refused := func(what string, parts ...string) {
		t.Helper()
		for _, args := range [][]string{{"daemon", "run"}, {"daemon", "start"}, {"daemon", "status"}, {"daemon", "stop"}, {"ps"}} {
			r := run(args...)
			if r.Code != 125 {
				t.Errorf("%s: airlock %v exited %d, want 125\n%s", what, args, r.Code, r)
			}
			for _, p := range append([]string{"refusing to use " + rtDir}, parts...) {
				if !strings.Contains(r.Stderr, p) {
					t.Errorf("%s: airlock %v: the error does not say %q\n%s", what, args, p, r)
				}
			}
		}
	}

	// Another user's directory, open to all: nothing is put in it.
	mkdirOf(rtDir, 0o777, attacker)
	refused("another user's directory", fmt.Sprintf("belongs to uid %d", attacker), fmt.Sprintf("not to you (uid %d", uid), "XDG_RUNTIME_DIR")
	if ents, err := os.ReadDir(rtDir); err != nil || len(ents) != 0 {
		t.Errorf("airlock put %v in another user's directory (%v)", ents, err)
	}
	if out, _ := exec.Command("pgrep", "-u", strconv.Itoa(uid)).Output(); len(out) > 0 {
		t.Errorf("processes of uid %d run: %s", uid, out)
	}
	if err := os.RemoveAll(rtDir); err != nil {
		t.Fatal(err)
	}

	// A link (another user's) to a directory of the user's.
	own := filepath.Join(home, "rt")
	mkdirOf(own, 0o700, uid)
	if err := os.Symlink(own, rtDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(rtDir, attacker, attacker); err != nil {
		t.Fatal(err)
	}
	refused("a symbolic link", "is a symbolic link")
	os.Remove(rtDir)

	// The user's own directory, but open to others.
	mkdirOf(rtDir, 0o755, uid)
	refused("a directory with mode 0755", "has mode 0755")
	os.Remove(rtDir)

	// No directory: it is made, the user's, mode 0700.
	r := run("daemon", "status")
	if r.Code != 1 || !strings.HasPrefix(r.Stdout, "Daemon not running") {
		t.Errorf("daemon status with no runtime dir: %s", r)
	}
	st, err := os.Lstat(rtDir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 || int(st.Sys().(*syscall.Stat_t).Uid) != uid {
		t.Errorf("the runtime dir made: %v %v, want a directory of uid %d with mode 0700", st, err, uid)
	}
}

// runTimeout runs the CLI bin with args in the project dir, killed after timeout.
func (e *env) runTimeout(bin string, timeout time.Duration, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = e.project
	cmd.Env = e.environ()
	cmd.WaitDelay = 5 * time.Second
	return clitest.RunCmd(e.t, cmd)
}
