package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

// remoteDaemonManifest has a copy and a ready-gated daemon: what the CLI writes into
// a remote daemon's sandbox, and what it waits for there.
const remoteDaemonManifest = `
[sandbox]
image = "{{image}}"

[copies.data]
source = "data"
target = "/data"

[daemons.web]
command = ["sh", "-c", "echo web-is-up; exec sleep 300"]
ready = { log = "web-is-up", timeout = "20s" }
`

// TestRemoteDaemonHost: with -H/--host (or AIRLOCK_HOST) the CLI uses that
// daemon instead of its user's local one: over TCP with the token, and over
// ssh:// (`ssh … airlock daemon dial-stdio`, here a stand-in ssh that runs it
// as the other user). ps, exec and stop reach the other daemon's sandbox. run
// and up work there as if this machine's files were out of its reach: the
// project and copies are written in through the API (a file the command makes
// stays inside), --output comes back through it, the exit code is the
// command's; no local daemon is started, nothing is left.
func TestRemoteDaemonHost(t *testing.T) {
	limit(t)
	box := newEnv(t, plainManifest)
	me := newEnv(t, remoteDaemonManifest)
	if err := os.MkdirAll(filepath.Join(me.Project, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(me.Project, "data", "x"), []byte("copied\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(me.Project, "hello.txt"), []byte("project-file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(box.Home, "token")
	if err := os.WriteFile(tokenFile, []byte("remote-host-token-9c2d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(testenv.FreePort(t))
	box.MustRun("daemon", "start", "--host", "127.0.0.1", "--port", port, "--token-file", tokenFile)
	box.MustRun("up", "-d")
	ps := box.PS()
	if len(ps) != 1 {
		t.Fatalf("ps after up -d: %+v", ps)
	}
	id := ps[0].ID

	// A stand-in ssh: what the remote user's `airlock daemon dial-stdio` does.
	bin := t.TempDir()
	var env strings.Builder
	for _, kv := range box.Dirs.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env.WriteString(" '" + kv + "'")
		}
	}
	// As ssh does, it hands the remote user's shell the command line, with
	// the remote user's PATH, where `airlock` is the binary under test.
	remoteBin := t.TempDir()
	if err := os.Symlink(clitest.Bin, filepath.Join(remoteBin, "airlock")); err != nil {
		t.Fatal(err)
	}
	ssh := "#!/bin/sh\n# ssh -T [-l user] [-p port] -- host COMMAND…\n" +
		"while [ \"$1\" != -- ]; do shift; done; shift 2\n" +
		"exec env" + env.String() + " 'PATH=" + remoteBin + ":/usr/bin:/bin' sh -c \"$*\"\n"
	if err := os.WriteFile(filepath.Join(bin, "ssh"), []byte(ssh), 0o755); err != nil {
		t.Fatal(err)
	}
	tcp := []string{"AIRLOCK_HOST=tcp://127.0.0.1:" + port, "AIRLOCK_TOKEN=remote-host-token-9c2d"}
	viaSSH := []string{"PATH=" + bin + ":" + os.Getenv("PATH")}

	r := me.RunEnv(tcp, "ps")
	if r.Code != 0 || !strings.Contains(r.Stdout, id) {
		t.Errorf("ps through AIRLOCK_HOST=tcp://…: want %s listed, got %s", id, r)
	}
	r = me.RunEnv(tcp, "exec", id, "--", "echo", "through-tcp")
	if r.Code != 0 || r.Stdout != "through-tcp\n" {
		t.Errorf("exec through tcp://: %s", r)
	}
	r = me.RunEnv(viaSSH, "-H", "ssh://me@box", "exec", id, "--", "sh", "-c", "echo through-ssh; exit 4")
	if r.Code != 4 || r.Stdout != "through-ssh\n" {
		t.Errorf("exec through -H ssh://: want exit 4 and its line, got %s", r)
	}
	r = me.RunEnv([]string{"AIRLOCK_HOST=tcp://127.0.0.1:" + port, "AIRLOCK_TOKEN=wrong"}, "ps")
	if r.Code == 0 || !strings.Contains(r.Stderr, "127.0.0.1:"+port) {
		t.Errorf("a wrong token: want a failure naming the daemon, got %s", r)
	}
	if r = me.RunEnv(tcp, "logs", id); r.Code != 0 {
		t.Errorf("logs through tcp://: %s", r)
	}
	r = me.RunEnv(tcp, "run", "--output", "out", "--", "sh", "-c",
		"cat /data/x hello.txt; mkdir out; echo made > out/f; echo no > stays-inside; exit 7")
	if r.Code != 7 || r.Stdout != "copied\nproject-file\n" {
		t.Errorf("run through a remote daemon: want exit 7 and the copied files, got %s", r)
	}
	if b, err := os.ReadFile(filepath.Join(me.Project, "out", "f")); err != nil || string(b) != "made\n" {
		t.Errorf("--output through a remote daemon: out/f %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(me.Project, "stays-inside")); err == nil {
		t.Error("a file the command made reached this machine's project: it was bind-mounted, not copied")
	}
	// A [sandbox.build] through the remote daemon: the context goes through the API.
	builder := newEnv(t, "[sandbox]\nnetwork = \"none\"\n\n[sandbox.build]\ncontext = \"img\"\n")
	if err := os.MkdirAll(filepath.Join(builder.Project, "img"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(builder.Project, "img", "Dockerfile"), []byte("FROM "+builder.Image+"\nCOPY mark /mark\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A context of its own each time: the image's tag is its context's sum, and
	// an image an earlier (interrupted) run left under that tag would be reused
	// with that run's project label.
	mark := "built-remotely " + randomKey()[:8] + "\n"
	if err := os.WriteFile(filepath.Join(builder.Project, "img", "mark"), []byte(mark), 0o644); err != nil {
		t.Fatal(err)
	}
	if r = builder.RunEnv(tcp, "run", "-q", "--", "cat", "/mark"); r.Code != 0 || r.Stdout != mark {
		t.Errorf("run of a [sandbox.build] through a remote daemon: %s", r)
	}
	built, _ := builder.Cli.ImageList(context.Background(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "dev.airlock.project="+builder.Project))})
	if len(built) != 1 {
		t.Errorf("the images built for the project: %+v, want one", built)
	}
	for _, im := range built {
		_ = testenv.RemoveImage(context.Background(), builder.Cli, im.ID)
	}
	r = me.RunEnv(viaSSH, "-H", "ssh://me@box", "up", "-d")
	mine := strings.TrimSpace(r.Stdout)
	if r.Code != 0 || mine == "" {
		t.Fatalf("up -d through ssh://: %s", r)
	}
	if r = me.RunEnv(viaSSH, "-H", "ssh://me@box", "exec", mine, "--", "cat", "/data/x"); r.Code != 0 || r.Stdout != "copied\n" {
		t.Errorf("exec in the up sandbox through ssh://: %s", r)
	}
	if r = me.RunEnv(tcp, "logs", mine, "web"); r.Code != 0 || !strings.Contains(r.Stdout, "web-is-up") {
		t.Errorf("logs of its daemon through tcp://: %s", r)
	}
	if r = me.RunEnv(viaSSH, "-H", "ssh://me@box", "down", mine); r.Code != 0 {
		t.Errorf("down through ssh://: %s", r)
	}
	if r = me.Run("-H", "gopher://box", "ps"); r.Code != 2 || !strings.Contains(r.Stderr, "gopher") {
		t.Errorf("an unknown scheme: %s", r)
	}
	r = me.RunEnv(viaSSH, "-H", "ssh://box", "stop", id)
	if r.Code != 0 {
		t.Errorf("stop through ssh://: %s", r)
	}
	if ps := box.PS(); len(ps) != 1 || ps[0].State != "stopped" {
		t.Errorf("after a stop through ssh://: %+v", ps)
	}
	if _, alive := me.DaemonPID(); alive {
		t.Error("a local daemon was started although every command named another")
	}
	if len(me.Containers()) != 0 {
		t.Errorf("run, up and down through the remote daemon left containers: %+v", me.Containers())
	}
	box.MustRun("down")
	box.assertClean()
}
