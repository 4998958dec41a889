package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/clitest"
	"github.com/airlock-dev/airlock/internal/testenv"
)

// TestRemoteDaemonHost: with -H/--host (or AIRLOCK_HOST) the CLI uses that
// daemon instead of its user's local one: over TCP with the token, and over
// ssh:// (`ssh … airlock daemon dial-stdio`, here a stand-in ssh that runs it
// as the other user). ps, exec and stop reach the other daemon's sandbox; the
// commands whose streams do not go through the API yet are refused (exit 2)
// before anything is made; no local daemon is started.
func TestRemoteDaemonHost(t *testing.T) {
	limit(t)
	box := newEnv(t, plainManifest)
	me := newEnv(t, plainManifest)
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
	ssh := "#!/bin/sh\n# ssh -T [-l user] [-p port] -- host airlock daemon dial-stdio\n" +
		"while [ \"$1\" != -- ]; do shift; done; shift 2\n" +
		"[ \"$1\" = airlock ] || exit 255; shift\n" +
		"exec env" + env.String() + " '" + clitest.Bin + "' \"$@\"\n"
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
	for _, args := range [][]string{{"run", "--", "true"}, {"up", "-d"}} {
		r = me.RunEnv(tcp, args...)
		if r.Code != 2 || !strings.Contains(r.Stderr, "through the daemon at tcp://127.0.0.1:"+port) {
			t.Errorf("%v through a remote daemon: want exit 2 saying it is not there yet, got %s", args, r)
		}
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
		t.Errorf("the refused commands left containers: %+v", me.Containers())
	}
	box.MustRun("down")
	box.assertClean()
}
