package projectfs

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/internal/exitcode"
	"github.com/airlock-dev/airlock/manifest"
)

// outputEntry is one entry of a test archive: a folder when its name ends
// with "/", else a regular file with data, or a link when link is set.
type outputEntry struct{ name, data, link string }

func outputArchive(t *testing.T, entries ...outputEntry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		switch {
		case strings.HasSuffix(e.name, "/"):
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func writeHostFile(t *testing.T, root, rel, data string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newTestOutput(t *testing.T, dir string, max int64) *Output {
	t.Helper()
	r := &manifest.Resolved{ProjectDir: dir, File: filepath.Join(dir, "sandbox.toml"),
		Layers: []manifest.LayerInfo{{Name: filepath.Join(dir, "cfg", "team.toml")}, {Name: "redis", Builtin: true}}}
	o, err := NewOutput(r, max, "--output-max")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestOutputRules: the copy back of an --output path only writes. Symbolic
// links on the host (at the path or above it), folders a file would replace,
// files a folder would replace, FIFOs, manifest layers, .git folders and paths
// of .airlockignore are skipped with a warning naming them, with what lies
// below; entries outside the path and links in the archive are skipped; the
// rest is written, existing files overwritten.
func TestOutputRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	elsewhere := t.TempDir()
	writeHostFile(t, dir, ".airlockignore", "out/*.env\n")
	writeHostFile(t, dir, "out/host.env", "host env\n")
	writeHostFile(t, dir, "out/keep/notes.txt", "notes\n")
	writeHostFile(t, dir, "out/deep/a/b.txt", "b\n")
	writeHostFile(t, dir, "out/file", "host file\n")
	writeHostFile(t, dir, "out/over.txt", "old\n")
	writeHostFile(t, dir, "out/cfg/team.toml", "team\n")
	if err := os.Symlink(elsewhere, filepath.Join(dir, "out", "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "out", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := newTestOutput(t, dir, 1<<20)
	// The layer named out/cfg/team.toml is not that one: make one that is.
	o.protect = append(o.protect, "out/cfg/team.toml")

	warnings, err := o.Extract(outputArchive(t,
		outputEntry{name: "out/"},
		outputEntry{name: "out/host.env", data: "sandbox\n"},
		outputEntry{name: "out/keep", data: "a file where a folder is\n"},
		outputEntry{name: "out/deep/", data: ""},
		outputEntry{name: "out/deep/a", data: "a file where a folder is, deeper\n"},
		outputEntry{name: "out/file/"},
		outputEntry{name: "out/file/inner", data: "below a file\n"},
		outputEntry{name: "out/link/"},
		outputEntry{name: "out/link/x", data: "through a link\n"},
		outputEntry{name: "out/fifo", data: "over a fifo\n"},
		outputEntry{name: "out/cfg/team.toml", data: "[sandbox]\nprivileged = true\n"},
		outputEntry{name: "out/v/.git/hooks/pre-commit", data: "pwned\n"},
		outputEntry{name: "out/sym", link: "/etc/passwd"},
		outputEntry{name: "other/x", data: "outside\n"},
		outputEntry{name: "out/../../x", data: "outside\n"},
		outputEntry{name: "out/over.txt", data: "new\n"},
		outputEntry{name: "out/new/n.txt", data: "n\n"},
	), "out")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(warnings, "\n")
	for _, want := range []string{"skipped out/host.env: left out of the sandbox by .airlockignore", "skipped out/keep: a folder on the host",
		"skipped out/deep/a: a folder on the host", "skipped out/file: a file on the host", "skipped out/link: a symbolic link on the host",
		"skipped out/fifo: not a regular file", "skipped out/cfg/team.toml: a manifest file", "skipped out/v/.git: a .git folder",
		"skipped out/sym (not a regular file or folder)", `skipped "other/x" (outside the path)`, `skipped "out/../../x" (outside the path)`} {
		if !strings.Contains(text, want) {
			t.Errorf("warnings lack %q:\n%s", want, text)
		}
	}
	if len(warnings) != 11 {
		t.Errorf("%d warnings, want one for each skipped path (11):\n%s", len(warnings), text)
	}
	for rel, want := range map[string]string{"out/host.env": "host env\n", "out/keep/notes.txt": "notes\n", "out/deep/a/b.txt": "b\n",
		"out/file": "host file\n", "out/cfg/team.toml": "team\n", "out/over.txt": "new\n", "out/new/n.txt": "n\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, rel)); err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", rel, b, err, want)
		}
	}
	for _, p := range []string{filepath.Join(elsewhere, "x"), filepath.Join(dir, "out", "v"), filepath.Join(dir, "out", "sym"), filepath.Join(dir, "other"), filepath.Join(filepath.Dir(dir), "x")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	if st, err := os.Lstat(filepath.Join(dir, "out", "fifo")); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the host's FIFO was replaced: %v %v", st, err)
	}
}

// TestOutputCheck: the --output paths the CLI refuses before anything starts.
func TestOutputCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeHostFile(t, dir, ".airlockignore", "secrets/\n*.key\n")
	o := newTestOutput(t, dir, 1<<20)
	for rel, want := range map[string]string{
		".": "it is the project dir itself", "./": "it is the project dir itself", "a/..": "it is the project dir itself",
		"..": "use a path inside the project dir", "../x": "use a path inside the project dir", "/abs": "use a path inside the project dir", "": "use a path inside the project dir",
		"sandbox.toml": "sandbox.toml is a manifest file", "sandbox.local.toml": "a manifest file", ".airlockignore": "a manifest file",
		"cfg/team.toml": "cfg/team.toml is a manifest file", ".git": "a .git folder", "sub/.git/hooks": "sub/.git is a .git folder",
		"CFG/Team.toml": "CFG/Team.toml is a manifest file", "sub/.Git/hooks": "sub/.Git is a .git folder",
		"secrets": "left out of the sandbox by .airlockignore", "secrets/x": "secrets is left out", "b.key": "b.key is left out",
	} {
		err := o.Check(rel)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "cannot copy --output") && !strings.HasPrefix(err.Error(), "invalid --output") {
			t.Errorf("Check(%q) = %v, want an error containing %q", rel, err, want)
		}
	}
	for _, rel := range []string{"out", "cfg", "reports/junit.xml", "sub/git", ".github"} {
		if err := o.Check(rel); err != nil {
			t.Errorf("Check(%q) = %v", rel, err)
		}
	}
}

// TestOutputMaxCountsBySize: files count their size (rounded up to 4 KiB
// blocks), folders a block; the entry that would pass the limit is refused
// (exit 125) with a message naming it and the limit, and neither it nor what
// follows is written.
func TestOutputMaxCountsBySize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := newTestOutput(t, dir, 16<<10)
	big := strings.Repeat("z", 9000) // 3 blocks
	_, err := o.Extract(outputArchive(t,
		outputEntry{name: "out/"},                // 1 block
		outputEntry{name: "out/a", data: "a"},    // 1 block
		outputEntry{name: "out/big", data: big},  // 3 blocks: 5 > 4
		outputEntry{name: "out/z", data: "late"}, // not reached
	), "out")
	var se *exitcode.Coded
	if err == nil || !strings.Contains(err.Error(), "cannot copy out/big back: it is 8.8 KiB and would take the --output copies past their limit of 16.0 KiB (--output-max)") ||
		!errors.As(err, &se) || se.Code != 125 {
		t.Fatalf("past the limit: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out", "a")); err != nil || string(b) != "a" {
		t.Errorf("out/a, before the limit: %q %v", b, err)
	}
	for _, rel := range []string{"out/big", "out/z"} {
		if _, err := os.Lstat(filepath.Join(dir, rel)); err == nil {
			t.Errorf("%s was written past the limit", rel)
		}
	}
	// The count goes on across the paths of a run.
	if _, err := o.Extract(outputArchive(t, outputEntry{name: "more", data: strings.Repeat("m", 8193)}), "more"); err == nil {
		t.Errorf("a second path went past the limit of the run")
	}
}

// TestOutputFreeSpace: a file the host's file system has no room for (less
// the 1% airlock leaves free, at most 64 MiB) is refused with a message that
// says how much is free.
func TestOutputFreeSpace(t *testing.T) {
	// Not parallel: it replaces freeSpace.
	old := freeSpace
	t.Cleanup(func() { freeSpace = old })
	// 2 MiB above the 64 MiB airlock leaves free (small files: a tar of tens
	// of MiB cost this test 10 s under the race detector).
	freeSpace = func(string) (uint64, uint64, error) { return 66 << 20, 10 << 30, nil }
	dir := t.TempDir()
	o := newTestOutput(t, dir, 1<<30)
	_, err := o.Extract(outputArchive(t, outputEntry{name: "f", data: strings.Repeat("f", 3<<20)}), "f")
	if err == nil || !strings.Contains(err.Error(), "cannot copy f back: it is 3.0 MiB and the host's file system at "+dir+" has 66.0 MiB free (airlock leaves 64.0 MiB of it free)") {
		t.Fatalf("no room: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "f")); err == nil {
		t.Errorf("the file was written")
	}
	if _, err := o.Extract(outputArchive(t, outputEntry{name: "g", data: strings.Repeat("g", 1<<20)}), "g"); err != nil {
		t.Errorf("room enough: %v", err)
	}
}
