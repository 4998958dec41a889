package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProjectFlag: --project DIR makes DIR the project dir of a manifest kept
// elsewhere (issue 24: --file made the manifest's folder the project): DIR is
// what the sandbox sees and starts in, relative mount sources start there, and
// its sandboxes are DIR's (labels, ps).
func TestProjectFlag(t *testing.T) {
	limit(t)
	e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	e.WriteFile("ci/sandbox.toml", strings.ReplaceAll(`[sandbox]
image = "{{image}}"
network = "none"

[mounts.data]
source = "./data"
target = "/data"
read_only = true
`, "{{image}}", e.Image))
	e.WriteFile("top.txt", "at the top\n")
	e.WriteFile("data/d.txt", "data at the top\n")
	e.WriteFile("ci/data/d.txt", "data beside the manifest\n")

	r := e.Run("--file", "ci/sandbox.toml", "--project", ".", "run", "--", "sh", "-c", "pwd; cat top.txt /data/d.txt")
	if r.Code != 0 {
		t.Fatalf("run: %s", r)
	}
	if want := e.Project + "\nat the top\ndata at the top\n"; r.Stdout != want {
		t.Errorf("run printed %q, want %q", r.Stdout, want)
	}
	// Without --project, the manifest's folder is the project.
	r = e.Run("--file", "ci/sandbox.toml", "run", "--", "sh", "-c", "pwd; cat /data/d.txt")
	if want := filepath.Join(e.Project, "ci") + "\ndata beside the manifest\n"; r.Code != 0 || r.Stdout != want {
		t.Errorf("without --project: %s (want stdout %q)", r, want)
	}
	// --project alone finds the nearest sandbox.toml from DIR up.
	sub := filepath.Join(e.Project, "ci")
	r = e.RunIn(t.TempDir(), nil, "--project", sub, "run", "--", "pwd")
	if r.Code != 0 || r.Stdout != sub+"\n" {
		t.Errorf("--project %s from elsewhere: %s", sub, r)
	}
	// An up sandbox belongs to DIR: ps, exec and down find it by DIR.
	e.MustRun("--file", "ci/sandbox.toml", "--project", ".", "up", "-d")
	if r := e.RunIn(t.TempDir(), nil, "--file", filepath.Join(sub, "sandbox.toml"), "--project", e.Project, "exec", "--", "cat", "top.txt"); r.Code != 0 || r.Stdout != "at the top\n" {
		t.Errorf("exec in the --project sandbox: %s", r)
	}
	e.MustRun("--file", "ci/sandbox.toml", "--project", ".", "down")

	for _, bad := range []string{filepath.Join(e.Project, "nope"), filepath.Join(e.Project, "top.txt")} {
		r := e.Run("--project", bad, "run", "--", "true")
		if r.Code != 2 || !strings.Contains(r.Stderr, "cannot use --project "+bad) {
			t.Errorf("--project %s: %s", bad, r)
		}
	}
	if _, err := os.Stat(filepath.Join(e.Project, "nope")); err == nil {
		t.Errorf("--project made the folder it was given")
	}
}
