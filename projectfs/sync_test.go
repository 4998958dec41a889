package projectfs

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWritePaths: the paths asked for, each with the directories on its way
// and a directory with what it holds, less what .airlockignore names; a
// path gone is reported, not written; "." is the whole project.
func TestWritePaths(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proj")
	files := map[string]string{
		".airlockignore":    "secret.txt\n**/build\n",
		"a/b/c.txt":         "c",
		"a/b/secret.txt":    "no",
		"new/x/y.txt":       "y",
		"new/build/out.bin": "no",
		"top.txt":           "top",
		"secret.txt":        "no",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	p, err := ReadProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Patterns are relative to the project dir, as for the copy at create.
	for rel, want := range map[string]bool{"secret.txt": true, "a/b/secret.txt": false, "build": true, "new/build/out.bin": true, "top.txt": false, ".": false} {
		if got := p.Excluded(rel); got != want {
			t.Errorf("Excluded(%q) = %v, want %v", rel, got, want)
		}
	}
	list := func(rels ...string) ([]string, map[string]string, *SyncResult) {
		t.Helper()
		var buf bytes.Buffer
		res, err := p.WritePaths(&buf, rels)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		bodies := map[string]string{}
		tr := tar.NewReader(&buf)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, h.Name)
			b, _ := io.ReadAll(tr)
			bodies[h.Name] = string(b)
			if h.Typeflag == tar.TypeSymlink {
				bodies[h.Name] = "-> " + h.Linkname
			}
		}
		return names, bodies, res
	}
	names, bodies, res := list("a/b/c.txt", "new", "new/x/y.txt", "gone.txt", "secret.txt", "link")
	want := []string{"proj/", "proj/a/", "proj/a/b/", "proj/a/b/c.txt", "proj/link", "proj/new/", "proj/new/x/", "proj/new/x/y.txt"}
	if !slices.Equal(names, want) {
		t.Errorf("entries %q, want %q", names, want)
	}
	if bodies["proj/a/b/c.txt"] != "c" || bodies["proj/new/x/y.txt"] != "y" || bodies["proj/link"] != "-> /etc/passwd" {
		t.Errorf("bodies %q", bodies)
	}
	if !slices.Equal(res.Vanished, []string{"gone.txt"}) || len(res.Changed) != 0 || res.Files != 2 {
		t.Errorf("result %+v, want gone.txt vanished and 2 files", res)
	}
	names, _, _ = list(".")
	for _, n := range names {
		if n == "proj/new/build/out.bin" || n == "proj/secret.txt" || n == "proj/new/build/" {
			t.Errorf("the whole project holds %s, which .airlockignore names", n)
		}
	}
	if !slices.Contains(names, "proj/top.txt") || !slices.Contains(names, "proj/.airlockignore") || names[0] != "proj/" {
		t.Errorf("the whole project: %q", names)
	}
}
