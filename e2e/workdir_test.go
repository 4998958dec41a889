package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProjectDirNotEnterable: a project dir the sandbox user cannot enter
// (mode 0700, owned by root, sandbox.user = "nobody") fails the run with 125
// and an error that says so, with the fixes, rather than "/bin/sh: not
// executable"; airlock exec says the same. With sandbox.project = "copy"
// (one of the fixes) the same run works.
func TestProjectDirNotEnterable(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"
network = "none"
user = "nobody"
`)
	if err := os.Chmod(e.Project, 0o700); err != nil {
		t.Fatal(err)
	}
	want := "cannot use working directory " + e.Project + ": uid 65534 cannot enter " + e.Project + " (owned by 0:0, mode 0700)"
	fixes := []string{"sandbox.user", "chmod o+x " + e.Project, `sandbox.project = "copy"`}
	r := e.Run("run", "--", "sh", "-c", "echo main-ran")
	if r.Code != 125 || strings.Contains(r.Stdout, "main-ran") || strings.Contains(r.Stderr, "not executable") {
		t.Errorf("run: want exit 125 without the main command and without \"not executable\", got %s", r)
	}
	contains(t, "run's stderr", r.Stderr, append([]string{want}, fixes...)...)

	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	r = e.Run("exec", "--", "sh", "-c", "echo exec-ran")
	if r.Code != 125 || strings.Contains(r.Stdout, "exec-ran") {
		t.Errorf("exec: want exit 125 without the command, got %s", r)
	}
	contains(t, "exec's stderr", r.Stderr, append([]string{want}, fixes...)...)
	e.MustRun("rm", "-f", id)

	e.WriteManifest(`
[sandbox]
image = "{{image}}"
network = "none"
user = "nobody"
project = "copy"
`)
	if r := e.Run("run", "--", "sh", "-c", "cat sandbox.toml >/dev/null && echo main-ran"); r.Code != 0 || r.Stdout != "main-ran\n" {
		t.Errorf("project = \"copy\": want exit 0 and main-ran, got %s", r)
	}
	e.assertClean()
}

// TestRelativeWorkdir: workdir = "tests" runs the main command in the
// project's tests folder (a module there whose go.mod replaces ../).
func TestRelativeWorkdir(t *testing.T) {
	limit(t)
	e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\nnetwork = \"none\"\nworkdir = \"tests\"\n")
	e.WriteFile("tests/marker", "here\n")
	r := e.MustRun("run", "--", "sh", "-c", "pwd; cat marker")
	if want := filepath.Join(e.Project, "tests") + "\nhere\n"; r.Stdout != want {
		t.Errorf("stdout %q, want %q", r.Stdout, want)
	}
}
