package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/test/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunClean(m)) }

// staticBinary builds a tiny static Linux program for the host architecture.
func staticBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "prog")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot build a static program: %v\n%s", err, out)
	}
	return bin
}

// repoTags returns the RepoTags of the archive's manifest.json.
func repoTags(t *testing.T, archive string) []string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s has no manifest.json", archive)
		} else if err != nil {
			t.Fatalf("cannot read %s: %v", archive, err)
		}
		if h.Name == "manifest.json" {
			var mf []struct{ RepoTags []string }
			if err := json.NewDecoder(tr).Decode(&mf); err != nil || len(mf) != 1 {
				t.Fatalf("cannot parse manifest.json (%v): %+v", err, mf)
			}
			return mf[0].RepoTags
		}
	}
}

func TestWritesArchive(t *testing.T) {
	bin := staticBinary(t)
	out := filepath.Join(t.TempDir(), "image.tar")
	var stdout strings.Builder
	// A build ID outside a git checkout: its '+' cannot be in a tag.
	if err := run([]string{"-binary", bin, "-build-id", "0.1.0-dev+20250101", "-arch", runtime.GOARCH, "-o", out}, &stdout); err != nil {
		t.Fatalf("mkimage: %v", err)
	}
	want := "localhost/airlock:0.1.0-dev_20250101"
	if !strings.Contains(stdout.String(), want) {
		t.Errorf("mkimage printed %q, want it to name %s", stdout.String(), want)
	}
	if tags := repoTags(t, out); !slices.Equal(tags, []string{want}) {
		t.Errorf("RepoTags %q, want [%s]", tags, want)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("archive: %v, %v; want mode 0644", fi, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), "*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %q", left)
	}

	if err := run([]string{"-binary", bin, "-tag", "example.com/a:b", "-o", out}, io.Discard); err != nil {
		t.Fatalf("mkimage -tag: %v", err)
	}
	if tags := repoTags(t, out); !slices.Equal(tags, []string{"example.com/a:b"}) {
		t.Errorf("RepoTags %q, want [example.com/a:b]", tags)
	}
}

func TestRejectsBadInput(t *testing.T) {
	bin := staticBinary(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "text")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := map[string]string{"amd64": "arm64"}[runtime.GOARCH]
	if other == "" {
		other = "amd64"
	}
	out := filepath.Join(dir, "image.tar")
	cases := map[string]struct {
		args []string
		want string
	}{
		"wrong arch":   {[]string{"-binary", bin, "-build-id", "x", "-arch", other, "-o", out}, "for linux/" + other},
		"unknown arch": {[]string{"-binary", bin, "-build-id", "x", "-arch", "vax", "-o", out}, "architecture"},
		"not elf":      {[]string{"-binary", text, "-build-id", "x", "-o", out}, "as a Linux executable"},
		"no name":      {[]string{"-binary", bin, "-o", out}, "one of -tag and -build-id"},
		"two names":    {[]string{"-binary", bin, "-tag", "a:b", "-build-id", "x", "-o", out}, "one of -tag and -build-id"},
		"no output":    {[]string{"-binary", bin, "-build-id", "x"}, "required"},
		"bad tag":      {[]string{"-binary", bin, "-tag", "a", "-o", out}, "no tag"},
	}
	// A dynamically linked executable of the host, when there is one.
	for _, p := range []string{"/bin/true", "/usr/bin/true"} {
		if b, err := os.ReadFile(p); err == nil {
			if err := checkBinary(p, b, runtime.GOARCH); err != nil && strings.Contains(err.Error(), "dynamically") {
				cases["dynamic"] = struct {
					args []string
					want string
				}{[]string{"-binary", p, "-build-id", "x", "-o", out}, "dynamically linked"}
				break
			}
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := run(tc.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("mkimage %q: %v, want an error about %q", tc.args, err, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("mkimage %q wrote %s", tc.args, out)
			}
		})
	}
}
