//go:build linux

package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/airlock-dev/airlock/test/clitest"
)

// TestTrustAsksOnATerminal: on a terminal, run shows the diff of a layer the
// sandbox changed and what it widens, and asks; "n" (or anything but yes) is
// the refusal, exit 2; "y" accepts it and the run goes on.
func TestTrustAsksOnATerminal(t *testing.T) {
	limit(t)
	e := newEnv(t, trustManifest)
	secret := e.hostSecret()
	e.MustRun("run", "--", "sh", "-c", `printf '[mounts.h]\nsource = "~"\ntarget = "/hosthome"\n' > sandbox.local.toml`)
	e.waitGone()

	for _, answer := range []string{"n", "y"} {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatalf("cannot open a pty: %v", err)
		}
		cmd := exec.Command(clitest.Bin, "run", "--", "cat", "/hosthome/.ssh/id_ed25519")
		cmd.Dir = e.Project
		cmd.Env = append(e.Environ(), "TERM=dumb")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		out := &ptyOutput{}
		go func() {
			b := make([]byte, 4096)
			for {
				n, err := ptmx.Read(b)
				out.mu.Lock()
				out.buf.Write(b[:n])
				out.mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(out.String(), "[y/N] ") {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("no question on the terminal; it shows:\n%q", out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		contains(t, "the terminal", out.String(), "sandbox.local.toml: changed while sandbox", `+target = "/hosthome"`, "it widens: mounts (mounts.h: ~ -> /hosthome)")
		if _, err := ptmx.Write([]byte(answer + "\n")); err != nil {
			t.Fatal(err)
		}
		var werr error
		select {
		case werr = <-done:
		case <-time.After(cmdTimeout):
			_ = cmd.Process.Kill()
			t.Fatalf("run did not end after %q; terminal:\n%q", answer, out.String())
		}
		tty.Close()
		code := 0
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			code = ee.ExitCode()
		}
		switch answer {
		case "n":
			if code != 2 || strings.Contains(out.String(), secret) {
				t.Errorf("answered n: want exit 2 without the file, got exit %d; terminal:\n%q", code, out.String())
			}
		case "y":
			if code != 0 {
				t.Errorf("answered y: want exit 0, got %d; terminal:\n%q", code, out.String())
			}
		}
		ptmx.Close()
	}
	// Accepted: no question any more, and the mount is there.
	if r := e.MustRun("run", "--", "cat", "/hosthome/.ssh/id_ed25519"); strings.TrimSpace(r.Stdout) != secret {
		t.Errorf("after y: %s", r)
	}
}
