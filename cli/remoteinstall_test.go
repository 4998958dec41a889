package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeRemote is a stand-in for ssh: it hands the command line to sh, as the
// remote user's shell, with HOME and PATH of a remote user of its own (no
// airlock on that PATH), and logs each invocation. Not parallel: ssh is
// found on this process's PATH.
type fakeRemote struct {
	home, bin, log string
}

func newFakeRemote(t *testing.T) *fakeRemote {
	t.Helper()
	f := &fakeRemote{home: t.TempDir(), bin: t.TempDir()}
	local := t.TempDir()
	f.log = filepath.Join(local, "ssh.log")
	writeExec(t, filepath.Join(local, "ssh"), "#!/bin/sh\necho \"$*\" >> '"+f.log+"'\n"+
		"while [ \"$1\" != -- ]; do shift; done; shift 2\n"+
		"exec env -i HOME='"+f.home+"' PATH='"+f.bin+":/usr/bin:/bin' sh -c \"$*\"\n")
	t.Setenv("PATH", local+":"+os.Getenv("PATH"))
	return f
}

func (f *fakeRemote) sshRuns() int {
	b, _ := os.ReadFile(f.log)
	return strings.Count(string(b), "\n")
}

func writeExec(t *testing.T, path, content string) {
	t.Helper()
	writeFile(t, path, content)
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

// fakeBuild is a stand-in for this build on the remote: it says its version,
// and as dial-stdio --mux its hello, then ends.
func fakeBuild(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "airlock-linux")
	writeExec(t, path, "#!/bin/sh\nif [ \"$1\" = version ]; then echo 'airlock test (build "+BuildID+")'; exit 0; fi\n"+
		"echo 'airlock-mux 1 "+BuildID+" linux amd64'\n")
	return path
}

// TestRemoteInstallPrompt: on a terminal, a remote without airlock is a
// question; no is exit 2 with the command to run, yes installs this build
// (AIRLOCK_REMOTE_BINARY here) into the remote user's cache and connects
// again.
func TestRemoteInstallPrompt(t *testing.T) {
	f := newFakeRemote(t)
	build := fakeBuild(t)
	h := newVaultHome(t, false)
	h.env[remoteBinaryEnv] = build
	r := h.runTTY(t, "n\n", "-H", "ssh://me@box", "ps")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "no airlock there (it runs Linux") ||
		!strings.Contains(r.stderr, "Install this build of airlock ("+BuildID+") into the remote user's ~/.cache/airlock/bin? [y/N]") ||
		!strings.Contains(r.stderr, "`airlock remote install ssh://me@box`, or run again with --install") {
		t.Fatalf("no to the question: %d %q", r.code, r.stderr)
	}
	if n := f.sshRuns(); n != 1 {
		t.Errorf("ssh ran %d times for a refused install, want 1", n)
	}
	r = h.runTTY(t, "y\n", "-H", "ssh://me@box", "ps")
	cached := filepath.Join(f.home, ".cache", "airlock", "bin", BuildID, "airlock")
	got, err := os.ReadFile(cached)
	want, _ := os.ReadFile(build)
	if err != nil || string(got) != string(want) || !strings.Contains(r.stderr, "Installing airlock build "+BuildID+" (linux/") {
		t.Fatalf("yes to the question: %v; stderr %q", err, r.stderr)
	}
	// The connection, the install, the connection again (the stand-in build
	// then ends: the request fails, which is not the install's business, and
	// may be tried again on a busy host).
	if n := f.sshRuns(); n < 1+3 {
		t.Errorf("ssh ran %d times for an install, want the connection, the install and the connection again", n-1)
	}
	if r := airlockEnv(t, h.env, "remote", "install", "ssh://me@box"); r.code != 0 || r.stdout != "airlock build "+BuildID+" is on ssh://me@box already\n" {
		t.Errorf("remote install of a build that is there: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// TestRemoteInstallChecksum: a copy whose SHA-256 differs on the remote is
// refused, and nothing of it is left in the cache.
func TestRemoteInstallChecksum(t *testing.T) {
	f := newFakeRemote(t)
	writeExec(t, filepath.Join(f.bin, "sha256sum"), "#!/bin/sh\necho 0000000000000000000000000000000000000000000000000000000000000000 \"$1\"\n")
	h := newVaultHome(t, false)
	h.env[remoteBinaryEnv] = fakeBuild(t)
	r := airlockEnv(t, h.env, "remote", "install", "ssh://me@box")
	if r.code != ExitAirlock || !strings.Contains(r.stderr, "cannot install airlock on ssh://me@box") || !strings.Contains(r.stderr, "the copy has SHA-256 0000") {
		t.Fatalf("a copy with another checksum: %d %q", r.code, r.stderr)
	}
	left, _ := os.ReadDir(filepath.Join(f.home, ".cache", "airlock", "bin", BuildID))
	if len(left) != 0 {
		t.Errorf("the cache keeps %d files after a failed install", len(left))
	}
}

// TestRemoteCommandSources: --remote-command, else AIRLOCK_REMOTE_COMMAND,
// else remote.command of config.toml; one that is not there is exit 2 naming
// it and where it came from, and nothing is installed.
func TestRemoteCommandSources(t *testing.T) {
	f := newFakeRemote(t)
	h := newVaultHome(t, false)
	h.userConfig(t, "[remote]\ncommand = \"/from/config/airlock\"\n")
	for _, c := range []struct {
		args   []string
		env    string
		path   string
		source string
	}{
		{nil, "", "/from/config/airlock", "remote.command of config.toml"},
		{nil, "~/from-env/airlock", "~/from-env/airlock", remoteCommandEnv},
		{[]string{"--remote-command", "/from/flag/airlock"}, "~/from-env/airlock", "/from/flag/airlock", "--remote-command"},
	} {
		env := map[string]string{}
		for k, v := range h.env {
			env[k] = v
		}
		if c.env != "" {
			env[remoteCommandEnv] = c.env
		}
		r := airlockEnv(t, env, append(append([]string{"-H", "ssh://me@box", "--install"}, c.args...), "ps")...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.path+" is not there") || !strings.Contains(r.stderr, "comes from "+c.source) {
			t.Errorf("%s: %d %q", c.source, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(f.home, ".cache")); err == nil {
		t.Error("something was installed although a remote command was set")
	}
	r := airlockEnv(t, h.env, "-H", "ssh://me@box", "--remote-command", "airlock; rm -rf ~", "ps")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "cannot use --remote-command") {
		t.Errorf("a remote command with shell syntax: %d %q", r.code, r.stderr)
	}
}

// airlockEnv runs the CLI in-process with exactly env, stdin empty.
func airlockEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	h := &vaultHome{env: env}
	return h.run(t, "", nil, args...)
}
