package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/test/testenv"
)

// TestCpRemote: `airlock cp` through a daemon on another machine (here one on
// tcp://): a host directory into a sandbox under a new name, and into a
// directory that exists; a sandbox's directory and file back to this host
// (a link kept as a link); the project's sandbox by :PATH, relative to its
// project; a tar stream on stdout. (What an archive may not write on this
// host: cli.TestExtractOut.)
func TestCpRemote(t *testing.T) {
	limit(t)
	box := newEnv(t, plainManifest)
	me := newEnv(t, syncManifest)
	me.WriteFile("data/a.txt", "from the host\n")
	me.WriteFile("data/sub/b.txt", "below\n")
	tokenFile := filepath.Join(box.Home, "token")
	if err := os.WriteFile(tokenFile, []byte("cp-token-77ab\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(testenv.FreePort(t))
	box.MustRun("daemon", "start", "--host", "127.0.0.1", "--port", port, "--token-file", tokenFile)
	tcp := []string{"AIRLOCK_HOST=tcp://127.0.0.1:" + port, "AIRLOCK_TOKEN=cp-token-77ab"}
	r := me.RunEnv(tcp, "up", "-d")
	id := strings.TrimSpace(r.Stdout)
	if r.Code != 0 || id == "" {
		t.Fatalf("up -d: %s", r)
	}
	run := func(args ...string) string {
		t.Helper()
		r := me.RunEnv(tcp, args...)
		if r.Code != 0 {
			t.Fatalf("%s: %s", strings.Join(args, " "), r)
		}
		return r.Stdout
	}

	run("cp", "data", id+":/tmp/got")
	run("exec", "--", "mkdir", "/tmp/into")
	run("cp", "data", id+":/tmp/into")
	if got := run("exec", "--", "sh", "-c", "cat /tmp/got/a.txt /tmp/got/sub/b.txt /tmp/into/data/a.txt"); got != "from the host\nbelow\nfrom the host\n" {
		t.Errorf("cp into the sandbox: %q", got)
	}

	run("exec", "--", "sh", "-c", "mkdir -p /tmp/out/d && echo made > /tmp/out/d/f && ln -s /etc/passwd /tmp/out/link && echo mine > made-inside.txt")
	back := filepath.Join(t.TempDir(), "back")
	run("cp", id+":/tmp/out", back)
	if b, err := os.ReadFile(filepath.Join(back, "d", "f")); err != nil || string(b) != "made\n" {
		t.Errorf("cp out of the sandbox: d/f %q, %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(back, "link")); err != nil || l != "/etc/passwd" {
		t.Errorf("a link copied out: %q, %v", l, err)
	}
	// :PATH is the project's sandbox, a relative path below its project.
	dir := t.TempDir()
	run("cp", ":made-inside.txt", dir)
	if b, err := os.ReadFile(filepath.Join(dir, "made-inside.txt")); err != nil || string(b) != "mine\n" {
		t.Errorf("cp :made-inside.txt: %q, %v", b, err)
	}
	if out := run("cp", ":data/a.txt", "-"); !strings.Contains(out, "from the host") {
		t.Errorf("cp to -: no tar of the file: %q", out)
	}
	if r = me.RunEnv(tcp, "cp", "a", "b"); r.Code != 2 {
		t.Errorf("cp between two host paths: want exit 2, got %s", r)
	}
	run("down")
	box.assertClean()
}
