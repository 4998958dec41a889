package projectfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/exitcode"
	"github.com/airlock-dev/airlock/manifest"
)

func TestDockerignore(t *testing.T) {
	ig := parseDockerignore(`
# comment
*.log
/build
**/node_modules
docs/**/*.tmp
secret?.txt
!important.log
tmp[0-9]
./dist/
`)
	for path, want := range map[string]bool{
		"a.log":                   true,
		"sub/a.log":               false, // *.log is for the root only
		"important.log":           false,
		"build":                   true,
		"build/x/y":               true, // below an excluded dir
		"sub/build":               false,
		"node_modules/x":          true,
		"a/b/node_modules/c/d.js": true,
		"docs/a.tmp":              true, // ** matches zero segments
		"docs/x/y/a.tmp":          true,
		"docs/x/a.txt":            false,
		"secret1.txt":             true,
		"secret.txt":              false,
		"tmp3":                    true,
		"tmpx":                    false,
		"dist/a":                  true,
		"main.go":                 false,
	} {
		if got := ig.excluded(path); got != want {
			t.Errorf("excluded(%q) = %v, want %v", path, got, want)
		}
	}
	// The last matching line wins.
	ig = parseDockerignore("logs\n!logs/keep.txt\n")
	if ig.excluded("logs/keep.txt") || !ig.excluded("logs/other.txt") {
		t.Errorf("an exception below an excluded dir is not honoured")
	}
	ig = parseDockerignore("!a.txt\n*.txt\n")
	if !ig.excluded("a.txt") {
		t.Errorf("a later pattern does not override an earlier exception")
	}
}

func TestRepoName(t *testing.T) {
	for in, want := range map[string]string{
		"my-project":   "my-project",
		"My_Project.2": "my-project-2",
		"--x--":        "x",
		"Ünïcode":      "n-code",
		"...":          "project",
		"":             "project",
	} {
		if got := repoName(in); got != want {
			t.Errorf("repoName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBuildContextHash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proj")
	writeFiles(t, dir, map[string]string{
		"Dockerfile":    "FROM scratch\n",
		"app/main.txt":  "v1",
		"ignored.log":   "x",
		".dockerignore": "*.log\n",
	})
	r := &manifest.Resolved{ProjectDir: dir}
	r.Sandbox.Build = &manifest.Build{Context: ".", Dockerfile: "Dockerfile", Args: map[string]string{"A": "1"}}
	sum := func() string {
		t.Helper()
		bc, err := newBuildContext(r)
		if err != nil {
			t.Fatal(err)
		}
		h, err := bc.hash()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := sum()
	if sum() != base {
		t.Fatal("the hash of an unchanged context changed")
	}
	writeFiles(t, dir, map[string]string{"ignored.log": "changed"})
	if sum() != base {
		t.Error("a change to an ignored file changed the hash")
	}
	r.Sandbox.Build.Args["A"] = "2"
	if sum() == base {
		t.Error("a changed build arg kept the hash")
	}
	r.Sandbox.Build.Args["A"] = "1"
	if err := os.Chmod(filepath.Join(dir, "app/main.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if sum() == base {
		t.Error("a changed file mode kept the hash")
	}
	if err := os.Chmod(filepath.Join(dir, "app/main.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if sum() != base {
		t.Error("restoring the mode did not restore the hash")
	}
	writeFiles(t, dir, map[string]string{"app/main.txt": "v2"})
	if sum() == base {
		t.Error("a changed file kept the hash")
	}

	r.Sandbox.Build.Dockerfile = "../Dockerfile"
	var e *exitcode.Coded
	if _, err := newBuildContext(r); !errors.As(err, &e) || e.Code != 2 {
		t.Errorf("a Dockerfile outside the context: %v, want a config error", err)
	}
	r.Sandbox.Build.Dockerfile = "Dockerfile"
	r.Sandbox.Build.Context = "missing"
	if _, err := newBuildContext(r); !errors.As(err, &e) || e.Code != 2 || !strings.Contains(err.Error(), "sandbox.build.context") {
		t.Errorf("a missing context: %v, want a config error naming sandbox.build.context", err)
	}
}

// writeFiles writes files (slash paths relative to dir → content).
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		writeHostFile(t, dir, filepath.FromSlash(name), body)
	}
}
