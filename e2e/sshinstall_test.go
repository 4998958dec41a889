//go:build projects

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/daemonfiles"
	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

const sshInstallManifest = `
[sandbox]
image = "{{image}}"
`

// buildIDOf is the build ID `airlock version` of bin prints.
func buildIDOf(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	_, id, ok := strings.Cut(strings.TrimSpace(string(out)), "(build ")
	if err != nil || !ok {
		t.Fatalf("%s version: %v: %q", bin, err, out)
	}
	return strings.TrimSuffix(id, ")")
}

// countedSSH puts an ssh before sshd's wrapper in me's PATH that counts its
// invocations (one line each in a log), and returns the count so far.
func countedSSH(t *testing.T, me *env, sshd *testenv.SSHD) func() int {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "ssh.log")
	script := "#!/bin/sh\necho \"$*\" >> '" + log + "'\nexec '" + filepath.Join(sshd.BinDir, "ssh") + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	me.Extra = append(me.Extra, "PATH="+dir+":"+os.Getenv("PATH"))
	return func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "\n")
	}
}

// unameSM is what `uname -sm` says on this machine (the stand-in's kernel).
func unameSM() string {
	if runtime.GOARCH == "arm64" {
		return "Linux aarch64"
	}
	return "Linux x86_64"
}

// TestSSHFirstUse: an ssh:// host without airlock. A command fails at once
// with exit 2 and the command that installs it (non-interactive, no
// --install), as does a remote command that is not there; with --install the
// CLI copies this build into the remote user's cache (checksum and build
// checked), and the run works through one ssh connection. Later runs use the
// cached build, each over one ssh connection.
func TestSSHFirstUse(t *testing.T) {
	limit(t)
	me, remote := newRemoteEnv(t, sshInstallManifest)
	sshd := remote.StartSSHD(t, "")
	host := "ssh://root@" + sshd.Alias
	ssh := countedSSH(t, me, sshd)
	id := buildIDOf(t, clitest.Bin)

	r := me.Run("-H", host, "ps")
	want := "airlock: cannot use " + host + ": no airlock there (it runs " + unameSM() + "): install this build (" + id +
		") there with `airlock remote install " + host + "`, or run again with --install\n"
	if r.Code != 2 || r.Stderr != want {
		t.Errorf("first use without airlock there: want exit 2 and\n%s got %s", want, r)
	}
	if n := ssh(); n != 1 {
		t.Errorf("the failed first use ran ssh %d times, want 1", n)
	}

	me.Extra = append(me.Extra, "AIRLOCK_REMOTE_COMMAND=/opt/airlock/bin/airlock")
	r = me.Run("-H", host, "--install", "ps")
	me.Extra = me.Extra[:len(me.Extra)-1]
	if r.Code != 2 || !strings.Contains(r.Stderr, "/opt/airlock/bin/airlock is not there") || !strings.Contains(r.Stderr, "AIRLOCK_REMOTE_COMMAND") {
		t.Errorf("a remote command that is not there: want exit 2 naming it and where it came from, got %s", r)
	}

	r = me.Run("-H", host, "--install", "run", "--", "sh", "-c", "echo installed-and-ran; exit 4")
	if r.Code != 4 || r.Stdout != "installed-and-ran\n" || !strings.Contains(r.Stderr, "Installing airlock build "+id) {
		t.Fatalf("run --install: want exit 4 and the output, got %s", r)
	}
	cached := sshd.HostPath(filepath.Join(sshd.RemoteDir, "home", ".cache", "airlock", "bin", id, "airlock"))
	if st, err := os.Stat(cached); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("the installed build %s: %v", cached, err)
	}
	if out, err := exec.Command(cached, "version").Output(); err != nil || !strings.Contains(string(out), "(build "+id+")") {
		t.Errorf("the installed build says %q, %v", out, err)
	}

	before := ssh()
	r = me.Run("-H", host, "run", "--", "echo", "second")
	if r.Code != 0 || r.Stdout != "second\n" {
		t.Errorf("a run once installed: %s", r)
	}
	if n := ssh() - before; n != 1 {
		t.Errorf("a run through ssh:// ran ssh %d times, want 1", n)
	}
	if r = me.Run("remote", "install", host); r.Code != 0 || r.Stdout != "airlock build "+id+" is on "+host+" already\n" {
		t.Errorf("remote install of a build that is there: %s", r)
	}
}

// TestSSHUpgrade: an ssh:// host whose airlock is another build. Without
// --install that is exit 2 naming both builds' command; `airlock remote
// install` replaces it (the cached build runs from then on) and the remote
// daemon of the other build is replaced by one of this build.
func TestSSHUpgrade(t *testing.T) {
	limit(t)
	me, remote := newRemoteEnv(t, sshInstallManifest)
	id := buildIDOf(t, clitest.Bin)
	if len(id) < 10 {
		t.Skipf("the binary under test has build ID %q, too short to make another of its length", id)
	}
	old, err := clitest.Binary{Path: clitest.Bin, BuildID: id}.Copy(filepath.Join(t.TempDir(), "airlock"), strings.Repeat("o", len(id)-9))
	if err != nil {
		t.Fatal(err)
	}
	sshd := remote.StartSSHD(t, old.Path)
	host := "ssh://root@" + sshd.Alias
	ssh := countedSSH(t, me, sshd)

	r := me.Run("-H", host, "ps")
	if r.Code != 2 || !strings.Contains(r.Stderr, "the airlock there is build "+old.BuildID+", not this one's") ||
		!strings.Contains(r.Stderr, "`airlock remote install "+host+"`") {
		t.Errorf("another build there: want exit 2 with the command to run, got %s", r)
	}
	rdir := func(d string) string { return sshd.HostPath(filepath.Join(sshd.RemoteDir, d)) }
	theirs, err := paths.FromEnv(clitest.Dirs{Home: rdir("home"), Config: rdir("config"), Data: rdir("data"), Runtime: rdir("run")}.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	daemonBuild := func() string {
		b, _ := os.ReadFile(daemonfiles.VersionFile(theirs))
		return strings.TrimSpace(string(b))
	}
	if got := daemonBuild(); got != old.BuildID {
		t.Errorf("the remote daemon the other build started is build %q, want %q", got, old.BuildID)
	}

	if r = me.Run("remote", "install", host); r.Code != 0 || !strings.Contains(r.Stderr, "Installing airlock build "+id) {
		t.Fatalf("remote install: %s", r)
	}
	before := ssh()
	if r = me.Run("-H", host, "run", "--", "echo", "upgraded"); r.Code != 0 || r.Stdout != "upgraded\n" {
		t.Errorf("a run after the upgrade: %s", r)
	}
	if n := ssh() - before; n != 1 {
		t.Errorf("a run through ssh:// ran ssh %d times, want 1", n)
	}
	if got := daemonBuild(); got != id {
		t.Errorf("the remote daemon is build %q after the upgrade, want %q", got, id)
	}
	// The old build stays where it was; the cached one is used.
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	if out, err := sshd.SSH(ctx, "root", "airlock", "version").Output(); err != nil || !strings.Contains(string(out), old.BuildID) {
		t.Errorf("the remote's own airlock: %q, %v", out, err)
	}
}
