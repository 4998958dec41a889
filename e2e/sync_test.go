package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

// syncManifest: a sandbox of a daemon on another machine, its project copied in.
const syncManifest = `
[sandbox]
image = "{{image}}"
`

// syncFiles is how many files the burst of TestUpSyncRemote changes at once.
const syncFiles = 1000

// TestUpSyncRemote: `up` through a daemon on another machine (here one on
// tcp://, which copies the project in through the files API) keeps the
// sandbox's copy in step with this host's edits while its shell runs: an
// edit, a new directory, a deletion, renames and a file replaced by a
// directory arrive; what .airlockignore
// names does not; 1000 files changed at once (a branch switch) all arrive.
// With --sync=false nothing is kept in step; `up` of the stopped sandbox
// brings the edits made meanwhile before its shell opens.
func TestUpSyncRemote(t *testing.T) {
	limit(t)
	box := newEnv(t, plainManifest)
	me := newEnv(t, syncManifest)
	me.WriteFile("hello.txt", "v1\n")
	me.WriteFile("old-name.txt", "renamed\n")
	me.WriteFile("doomed.txt", "doomed\n")
	me.WriteFile("kind", "a file\n")
	me.WriteFile(".airlockignore", "secret.txt\nbuild/\n")
	for i := range syncFiles {
		me.WriteFile(fmt.Sprintf("tree/d%d/f%d", i%10, i), "old\n")
	}
	tokenFile := filepath.Join(box.Home, "token")
	if err := os.WriteFile(tokenFile, []byte("sync-token-5e1f\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(testenv.FreePort(t))
	box.MustRun("daemon", "start", "--host", "127.0.0.1", "--port", port, "--token-file", tokenFile)
	tcp := []string{"AIRLOCK_HOST=tcp://127.0.0.1:" + port, "AIRLOCK_TOKEN=sync-token-5e1f"}

	// up's shell reads its commands from a pipe this test holds open.
	cmd := me.Command(t.Context(), "up")
	cmd.Env = append(cmd.Env, tcp...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	up := clitest.StartCmd(t, cmd)
	inside := func(script string) string {
		r := me.RunEnv(tcp, "exec", "--", "sh", "-c", script)
		if r.Code != 0 {
			return "exec failed: " + r.String()
		}
		return r.Stdout
	}
	waitFor := func(t *testing.T, what, script, want string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			got := inside(script)
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %s gives %q, want %q", what, script, got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor(t, "the shell's sandbox", "cat hello.txt", "v1\n")
	if !strings.Contains(up.Stderr.String(), "keeping the sandbox's copy of "+me.Project) {
		t.Errorf("up does not say it keeps the copy in step: %q", up.Stderr.String())
	}

	t.Run("edit", func(t *testing.T) {
		me.WriteFile("hello.txt", "v2\n")
		me.WriteFile("new/dir/made.txt", "made\n")
		waitFor(t, "an edit", "cat hello.txt new/dir/made.txt", "v2\nmade\n")
	})
	t.Run("delete and rename", func(t *testing.T) {
		if err := os.Remove(filepath.Join(me.Project, "doomed.txt")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(me.Project, "old-name.txt"), filepath.Join(me.Project, "new-name.txt")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(me.Project, "new"), filepath.Join(me.Project, "moved")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a deletion and renames", "ls doomed.txt old-name.txt new 2>&1 | grep -c 'No such'; cat new-name.txt moved/dir/made.txt", "3\nrenamed\nmade\n")
	})
	t.Run("kind changed", func(t *testing.T) {
		if err := os.Remove(filepath.Join(me.Project, "kind")); err != nil {
			t.Fatal(err)
		}
		me.WriteFile("kind/inner.txt", "now a directory\n")
		waitFor(t, "a file replaced by a directory", "cat kind/inner.txt", "now a directory\n")
	})
	t.Run("ignored", func(t *testing.T) {
		me.WriteFile("secret.txt", "host-only\n")
		me.WriteFile("build/out.bin", "host-only\n")
		me.WriteFile("after-ignored.txt", "marker\n")
		waitFor(t, "a file written after the ignored ones", "cat after-ignored.txt", "marker\n")
		if got := inside("ls secret.txt build 2>&1 | grep -c 'No such'"); got != "2\n" {
			t.Errorf("a path .airlockignore names reached the sandbox: %q", got)
		}
	})
	t.Run("burst", func(t *testing.T) {
		for i := range syncFiles {
			me.WriteFile(fmt.Sprintf("tree/d%d/f%d", i%10, i), "new\n")
		}
		waitFor(t, "1000 changed files", "cat tree/d*/f* | grep -c new; cat tree/d*/f* | grep -c old; true", fmt.Sprintf("%d\n0\n", syncFiles))
	})

	stdin.Close() // the shell ends, and so does up
	r := up.MustWait(t, 2*time.Minute)
	if r.Code != 0 {
		t.Fatalf("up: %s", r)
	}

	// Edited while the sandbox is stopped: up brings it in before the shell.
	me.WriteFile("hello.txt", "v3\n")
	again := me.Command(t.Context(), "up")
	again.Env = append(again.Env, tcp...)
	again.Stdin = strings.NewReader("cat hello.txt\n")
	if r := clitest.RunCmd(t, again); r.Code != 0 || r.Stdout != "v3\n" {
		t.Errorf("up of the stopped sandbox after an edit: want v3, got %s", r)
	}
	off := me.Command(t.Context(), "up", "--sync=false")
	off.Env = append(off.Env, tcp...)
	off.Stdin = strings.NewReader("true\n")
	if r := clitest.RunCmd(t, off); r.Code != 0 || strings.Contains(r.Stderr, "keeping") {
		t.Errorf("up --sync=false: %s", r)
	}
	if r := me.RunEnv(tcp, "down"); r.Code != 0 {
		t.Errorf("down: %s", r)
	}
	if len(me.Containers()) != 0 {
		t.Errorf("up through the remote daemon left containers: %+v", me.Containers())
	}
	box.assertClean()
}

// TestUpSyncLocalCopy: a local daemon with sandbox.project = "copy" keeps the
// copy in step too; a bind-mounted project, live already, is not synced.
func TestUpSyncLocalCopy(t *testing.T) {
	limit(t)
	e := newEnv(t, syncManifest+"project = \"copy\"\n")
	e.WriteFile("hello.txt", "v1\n")
	cmd := e.Command(t.Context(), "up")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	up := clitest.StartCmd(t, cmd)
	var got string
	eventually(t, time.Minute, "the copy", func() bool {
		got = e.Run("exec", "--", "cat", "hello.txt").Stdout
		return got == "v1\n"
	})
	e.WriteFile("hello.txt", "v2\n")
	eventually(t, time.Minute, "an edit in the copy", func() bool {
		return e.Run("exec", "--", "cat", "hello.txt").Stdout == "v2\n"
	})
	stdin.Close()
	if r := up.MustWait(t, 2*time.Minute); r.Code != 0 || !strings.Contains(r.Stderr, "keeping") {
		t.Errorf("up of a copied project: %s", r)
	}
	e.MustRun("down")

	bind := newEnv(t, plainManifest)
	c := bind.Command(t.Context(), "up")
	c.Stdin = strings.NewReader("true\n")
	if r := clitest.RunCmd(t, c); r.Code != 0 || strings.Contains(r.Stderr, "keeping") {
		t.Errorf("up of a bind-mounted project: want no sync, got %s", r)
	}
	bind.MustRun("down")
}
