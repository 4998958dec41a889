package cli

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExtractOut: what `cp` writes on this host out of a sandbox's archive:
// a name leaving the destination, an entry below a link the archive made and
// a device are skipped with a warning; a link is made as a link; the first
// name takes the destination's when asked.
func TestExtractOut(t *testing.T) {
	outside := t.TempDir()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body string) {
		h.Size = int64(len(body))
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	add(&tar.Header{Name: "src/", Typeflag: tar.TypeDir, Mode: 0o755}, "")
	add(&tar.Header{Name: "src/f", Typeflag: tar.TypeReg}, "file")
	add(&tar.Header{Name: "src/l", Typeflag: tar.TypeSymlink, Linkname: outside}, "")
	add(&tar.Header{Name: "src/l/x", Typeflag: tar.TypeReg}, "through the link")
	add(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg}, "out")
	add(&tar.Header{Name: "/abs", Typeflag: tar.TypeReg}, "out")
	add(&tar.Header{Name: "src/dev", Typeflag: tar.TypeChar}, "")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	var warnings []string
	warn := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
	if err := extractOut(bytes.NewReader(buf.Bytes()), dest, "renamed", warn); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "renamed", "f")); err != nil || string(b) != "file" {
		t.Errorf("renamed/f: %q, %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(dest, "renamed", "l")); err != nil || l != outside {
		t.Errorf("renamed/l: %q, %v", l, err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("an entry was written through the archive's link: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dest), "escape")); err == nil {
		t.Error("../escape was written")
	}
	if len(warnings) != 4 || !strings.Contains(strings.Join(warnings, "\n"), "symbolic link") {
		t.Errorf("warnings %q, want 4 (the link, .., /abs, the device)", warnings)
	}
}
