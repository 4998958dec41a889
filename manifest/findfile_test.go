package manifest_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

func TestFindFile(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b/c", "a/sandbox.toml.d", "x/y", "z/sandbox.toml"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"sandbox.toml", "a/sandbox.toml", "x/sandbox.local.toml"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(img), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct{ from, want string }{
		{"a/b/c", "a/sandbox.toml"}, // nearest ancestor
		{"a", "a/sandbox.toml"},     // the dir itself
		{"a/sandbox.toml.d", "a/sandbox.toml"},
		{"x/y", "sandbox.toml"}, // a local file alone does not make a project
		{"z", "sandbox.toml"},   // a directory named sandbox.toml is not a manifest
		{".", "sandbox.toml"},
	}
	for _, tt := range tests {
		got, err := manifest.FindFile(filepath.Join(root, tt.from))
		if err != nil {
			t.Errorf("FindFile(%s): %v", tt.from, err)
			continue
		}
		if want := filepath.Join(root, tt.want); got != want {
			t.Errorf("FindFile(%s) = %s, want %s", tt.from, got, want)
		}
	}

	// A relative dir is resolved against the working directory.
	t.Chdir(filepath.Join(root, "a", "b"))
	if got, err := manifest.FindFile("c"); err != nil || got != filepath.Join(root, "a", "sandbox.toml") {
		t.Errorf("FindFile(c) from a/b = %q, %v", got, err)
	}
}

func TestFindFileNone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "deep", "er")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := manifest.FindFile(dir)
	if err == nil && !strings.HasPrefix(got, filepath.Dir(filepath.Dir(dir))) {
		t.Skipf("an ancestor of the temp dir holds %s", got)
	}
	if !errors.Is(err, manifest.ErrNoManifest) {
		t.Errorf("FindFile in an empty tree: %v, want ErrNoManifest", err)
	}
}
