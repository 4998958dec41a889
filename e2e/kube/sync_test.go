//go:build kube

package kube_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/test/clitest"
)

// TestUpSyncOnCluster (issue 43): on the Kubernetes backend the project is
// copied into the Pod; while `up`'s shell runs, the host's edits reach it: an
// edit, a deletion, a rename, not what .airlockignore names, and 1000 files
// changed at once.
func TestUpSyncOnCluster(t *testing.T) {
	e, cs := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	e.WriteFile("hello.txt", "v1\n")
	e.WriteFile("doomed.txt", "doomed\n")
	e.WriteFile("old-name.txt", "renamed\n")
	e.WriteFile(".airlockignore", "secret.txt\n")
	const files = 1000
	for i := range files {
		e.WriteFile(fmt.Sprintf("tree/d%d/f%d", i%10, i), "old\n")
	}
	cmd := e.Command(t.Context(), "up")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	up := clitest.StartCmd(t, cmd)
	waitFor := func(what, script, want string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			r := e.Run("exec", "--", "sh", "-c", script+"; true")
			if r.Code == 0 && r.Stdout == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %s gives %s, want %q\nup: %s", what, script, r, want, up.Stderr.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitFor("the Pod's copy", "cat hello.txt", "v1\n")

	e.WriteFile("hello.txt", "v2\n")
	waitFor("an edit", "cat hello.txt", "v2\n")
	if err := os.Remove(filepath.Join(e.Project, "doomed.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(e.Project, "old-name.txt"), filepath.Join(e.Project, "new-name.txt")); err != nil {
		t.Fatal(err)
	}
	e.WriteFile("secret.txt", "host-only\n")
	e.WriteFile("marker.txt", "after\n")
	waitFor("a deletion, a rename and a marker", "ls doomed.txt old-name.txt secret.txt 2>&1 | grep -c 'No such'; cat new-name.txt marker.txt", "3\nrenamed\nafter\n")
	for i := range files {
		e.WriteFile(fmt.Sprintf("tree/d%d/f%d", i%10, i), "new\n")
	}
	waitFor("1000 changed files", "cat tree/d*/f* | grep -c new", fmt.Sprintf("%d\n", files))

	stdin.Close()
	if r := up.MustWait(t, 2*time.Minute); r.Code != 0 || !strings.Contains(r.Stderr, "keeping") {
		t.Errorf("up: %s", r)
	}
	e.MustRun("down")
	waitNoPods(t, cs, e.Project, 30*time.Second)
}
