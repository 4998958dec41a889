//go:build projects

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/test/clitest"
)

// sshdManifest is remoteDaemonManifest with a vault value in [env].
const sshdManifest = `
[sandbox]
image = "{{image}}"

[env]
TOKEN = "${SSHD_TOK}"

[copies.data]
source = "data"
target = "/data"

[daemons.web]
command = ["sh", "-c", "echo web-is-up; exec sleep 300"]
ready = { log = "web-is-up", timeout = "20s" }
`

// TestRemoteDaemonOverSSHD: `airlock -H ssh://root@box` through the real ssh
// client to Debian's sshd, which runs in the mount and network namespaces of
// the stand-in remote Engine (a machine that sees none of this host's files
// and whose `airlock` uses its own Engine): a key pair and host key the test
// made, nothing of the user's ssh configuration. run gets its ready-gated
// daemon, a vault value of this machine and the copies, exits 7, brings
// --output back and leaves the project untouched; up -d, exec (its exit
// code), logs -f (ended by down) and down work. No local daemon starts; the
// remote one started on demand, and nothing is left: no container on the
// stand-in, no state there, no remote daemon or sshd process.
func TestRemoteDaemonOverSSHD(t *testing.T) {
	limit(t)
	me, remote := newRemoteEnv(t, sshdManifest)
	sshd := remote.StartSSHD(t, clitest.Bin)
	host := "ssh://root@" + sshd.Alias
	me.Extra = append(me.Extra, "PATH="+sshd.BinDir+":"+os.Getenv("PATH"), "AIRLOCK_VAULT_PASSPHRASE=sshd passphrase")
	me.WriteFile("data/x", "copied\n")
	me.WriteFile("hello.txt", "project-file\n")

	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	set := me.Command(ctx, "secrets", "set", "SSHD_TOK", "--stdin")
	set.Stdin = strings.NewReader("vault-over-sshd\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("secrets set: %v\n%s", err, out)
	}

	// The remote user's airlock: its own dirs, in the stand-in's /tmp.
	rdir := func(d string) string { return sshd.HostPath(filepath.Join(sshd.RemoteDir, d)) }
	theirs, err := paths.FromEnv(clitest.Dirs{Home: rdir("home"), Config: rdir("config"), Data: rdir("data"), Runtime: rdir("run")}.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	remotePID := func() (int, bool) {
		b, err := os.ReadFile(filepath.Join(theirs.DaemonDir(), "airlockd.pid"))
		if err != nil {
			return 0, false
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid, err == nil && pid > 0 && syscall.Kill(pid, 0) == nil
	}

	r := me.Run("-H", host, "run", "--output", "out", "--", "sh", "-c",
		"grep -q web-is-up /airlock/state/daemons/web/stdout.log && echo web-was-ready; cat /data/x hello.txt; echo token=$TOKEN; "+
			"mkdir out; echo made > out/f; echo no > stays-inside; exit 7")
	if r.Code != 7 || r.Stdout != "web-was-ready\ncopied\nproject-file\ntoken=vault-over-sshd\n" {
		t.Errorf("run through sshd: want exit 7, the ready daemon, the copies and the vault value, got %s", r)
	}
	if b, err := os.ReadFile(filepath.Join(me.Project, "out", "f")); err != nil || string(b) != "made\n" {
		t.Errorf("--output through sshd: out/f %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(me.Project, "stays-inside")); err == nil {
		t.Error("a file the command made reached this machine's project: it was bind-mounted, not copied")
	}
	pid, alive := remotePID()
	if !alive {
		t.Fatalf("no remote daemon runs in the stand-in after run (pid file %s)", filepath.Join(theirs.DaemonDir(), "airlockd.pid"))
	}
	// It is another daemon than this user's, on the other side of sshd.
	theirNS, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	standinNS, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", remote.PID))
	if theirNS == "" || theirNS != standinNS {
		t.Errorf("the remote daemon (pid %d) runs in mount namespace %q, not the stand-in's %q", pid, theirNS, standinNS)
	}
	contains(t, "sshd's log", sshd.Log(), "Accepted publickey for root")
	eventually(t, 30*time.Second, "the run's container to be removed from the stand-in's Engine", func() bool {
		return len(listProject(t, remote, me.Project)) == 0
	})

	r = me.Run("-H", host, "up", "-d")
	id := strings.TrimSpace(r.Stdout)
	if r.Code != 0 || id == "" {
		t.Fatalf("up -d through sshd: %s", r)
	}
	if n := len(listProject(t, remote, me.Project)); n != 1 || len(me.Containers()) != 0 {
		t.Errorf("the up sandbox is not on the stand-in's Engine alone (%d there, %d here)", n, len(me.Containers()))
	}
	r = me.Run("-H", host, "exec", id, "--", "sh", "-c", "cat /data/x; echo token=$TOKEN; exit 5")
	if r.Code != 5 || r.Stdout != "copied\ntoken=vault-over-sshd\n" {
		t.Errorf("exec through sshd: want exit 5, the copy and the vault value, got %s", r)
	}
	follow := me.Start("-H", host, "logs", "-f", id, "web")
	eventually(t, 30*time.Second, "logs -f through sshd to show the daemon's line", func() bool {
		return strings.Contains(follow.Stdout.String(), "web-is-up")
	})
	select {
	case <-follow.Done:
		t.Fatalf("logs -f ended while the sandbox runs: %s", follow.Stderr)
	default:
	}
	if r = me.Run("-H", host, "down", id); r.Code != 0 {
		t.Errorf("down through sshd: %s", r)
	}
	if r = follow.MustWait(t, 30*time.Second); r.Code != 0 {
		t.Errorf("logs -f after down: %s", r)
	}
	if n := len(listProject(t, remote, me.Project)); n != 0 {
		t.Errorf("down through sshd left %d containers on the stand-in", n)
	}

	if _, alive := me.DaemonPID(); alive {
		t.Error("a local daemon was started although every command named another")
	}
	if p, alive := remotePID(); !alive || p != pid {
		t.Errorf("the remote daemon (pid %d) is not the one run started on demand: %d, alive %v", pid, p, alive)
	}
	if states, _ := filepath.Glob(filepath.Join(theirs.StateRoot, "sandboxes", "*")); len(states) > 0 {
		t.Errorf("the remote daemon keeps state dirs after down: %v", states)
	}
	if problems := sshd.Stop(); len(problems) > 0 {
		t.Errorf("stopping the remote daemon and sshd:\n  %s", strings.Join(problems, "\n  "))
	}
	if left := sshd.Left(); len(left) > 0 {
		t.Errorf("left of sshd: %v", left)
	}
	// Reparented to PID 1 when it detached, it may be a zombie for a moment.
	eventually(t, 10*time.Second, "the remote daemon to be gone", func() bool { return syscall.Kill(pid, 0) != nil })
	me.assertClean()
}
