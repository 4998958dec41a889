package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// trustManifest is a project whose sandbox writes into its bind-mounted project dir.
const trustManifest = `
[sandbox]
image = "{{image}}"
network = "none"
`

// hostSecret puts a file only the host should read in the test's home dir and
// returns its content.
func (e *env) hostSecret() string {
	e.T.Helper()
	secret := "HOST-KEY-" + uniq("secret")
	dir := filepath.Join(e.Home, ".ssh")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		e.T.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "id_ed25519"), []byte(secret+"\n"), 0o644); err != nil {
		e.T.Fatal(err)
	}
	return secret
}

// waitGone waits until the project's run sandboxes are removed: run returns
// with its command's code while the daemons shut down and the sandbox is
// removed, and an edit made before then is made while a sandbox runs.
func (e *env) waitGone() {
	e.T.Helper()
	eventually(e.T, cmdTimeout, "the run sandbox to be removed", func() bool { return len(e.Containers()) == 0 })
}

// TestTrustSandboxRewritesItsPolicy: a run that writes sandbox.local.toml (a
// mount of the host's home) does not get that mount on the next run: it exits 2
// naming the file and what it widens, prints nothing of the host's file, until
// `airlock trust` (which shows the diff) accepts it. A change the user makes
// while no sandbox runs needs nothing.
func TestTrustSandboxRewritesItsPolicy(t *testing.T) {
	limit(t)
	e := newEnv(t, trustManifest)
	secret := e.hostSecret()

	// The user's own edit, made while no sandbox runs (right after a run
	// returned), is taken as it is.
	e.MustRun("run", "--", "true")
	e.WriteFile("sandbox.toml", strings.ReplaceAll(trustManifest, "{{image}}", e.Image)+"\n[env]\nUSER_EDIT = \"yes\"\n")
	if r := e.MustRun("run", "--", "sh", "-c", "echo $USER_EDIT"); strings.TrimSpace(r.Stdout) != "yes" {
		t.Fatalf("the user's edit did not take effect: %s", r)
	}

	// The sandbox rewrites its own policy.
	e.MustRun("run", "--", "sh", "-c", `printf '[mounts.h]\nsource = "~"\ntarget = "/hosthome"\n' > sandbox.local.toml`)
	e.waitGone()
	r := e.Run("run", "--", "cat", "/hosthome/.ssh/id_ed25519")
	if strings.Contains(r.Stdout+r.Stderr, secret) {
		t.Fatalf("the sandbox's own sandbox.local.toml took effect silently: %s", r)
	}
	if r.Code != 2 {
		t.Errorf("want exit 2, got %s", r)
	}
	contains(t, "stderr", r.Stderr, "config error: sandbox.local.toml changed while sandbox", "mounts (mounts.h: ~ -> /hosthome)", `airlock trust`)
	if len(e.Containers()) != 0 {
		t.Errorf("a refused run made containers: %v", e.Containers())
	}
	// Refused again: nothing was accepted by the refusal.
	if r := e.Run("run", "--", "true"); r.Code != 2 {
		t.Errorf("the second run after the change: want exit 2, got %s", r)
	}

	tr := e.MustRun("trust")
	contains(t, "trust's output", tr.Stdout, "sandbox.local.toml", `+target = "/hosthome"`, "mounts (mounts.h: ~ -> /hosthome)")
	r = e.MustRun("run", "--", "cat", "/hosthome/.ssh/id_ed25519")
	if strings.TrimSpace(r.Stdout) != secret {
		t.Errorf("after airlock trust the mount should be there: %s", r)
	}
	if r := e.MustRun("trust"); !strings.Contains(r.Stdout, "nothing to trust") {
		t.Errorf("a second trust: %s", r)
	}
}

// TestTrustUpDetached: code run in an `up -d` sandbox (by exec) that edits a
// preset the manifest names by path is refused at the next up, while the
// sandbox still runs and after it stopped, naming the file and what it
// widens, until `airlock trust`; an edit the user makes after the sandbox is
// gone needs nothing.
func TestTrustUpDetached(t *testing.T) {
	limit(t)
	e := newEnv(t, "presets = [\"./team.toml\"]\n"+trustManifest)
	e.WriteFile("team.toml", "[env]\nTEAM = \"1\"\n")
	defer e.Run("down")

	e.MustRun("up", "-d")
	e.MustRun("exec", "--", "sh", "-c", `printf '[sandbox]\ncap_add = ["NET_ADMIN"]\n' >> team.toml`)
	for _, when := range []string{"running", "stopped"} {
		if when == "stopped" {
			r := e.MustRun("stop")
			contains(t, "stop's stderr", r.Stderr, "warning: team.toml changed while sandbox")
		}
		r := e.Run("up", "-d")
		if r.Code != 2 {
			t.Errorf("up -d with the sandbox %s: want exit 2, got %s", when, r)
		}
		contains(t, "stderr of up -d with the sandbox "+when, r.Stderr, "config error: team.toml changed while sandbox", "capabilities (cap_add NET_ADMIN)")
	}
	if ps := e.PS(); len(ps) != 1 || ps[0].State != "stopped" {
		t.Errorf("the refused up started something: %+v", ps)
	}

	tr := e.MustRun("trust")
	contains(t, "trust's output", tr.Stdout, "team.toml: changed while sandbox", `+cap_add = ["NET_ADMIN"]`, "trusted")
	e.MustRun("up", "-d")
	e.MustRun("down")

	// The user's edit once the sandbox is gone: taken as it is.
	e.WriteFile("team.toml", "[env]\nTEAM = \"2\"\n")
	e.MustRun("up", "-d")
	if r := e.MustRun("exec", "--", "sh", "-c", "echo $TEAM"); strings.TrimSpace(r.Stdout) != "2" {
		t.Errorf("the user's edit did not take effect: %s", r)
	}
	e.MustRun("down")
}
