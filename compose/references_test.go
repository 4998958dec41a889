//go:build !nocompose

package compose

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReferenced: every file a compose file leads its load to read (include,
// with env_file or the included project's .env; extends, followed into the
// file it names; a service's env_file) is listed, once, and read through the
// given reader.
func TestReferenced(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	main := write("compose.yaml", `
include:
  - sub/inc.yaml
  - path: ${INC_DIR}/other.yaml
    env_file: other.env
services:
  web:
    extends:
      file: base.yaml
      service: base
    env_file: web.env
`)
	write("sub/inc.yaml", "services:\n  inc:\n    image: x\n")
	write("more/other.yaml", "services:\n  o:\n    extends: { file: deep/base2.yaml, service: b }\n")
	write("more/deep/base2.yaml", "services:\n  b:\n    image: x\n")
	write("base.yaml", "services:\n  base:\n    image: x\n")
	content, _ := os.ReadFile(main)
	var read []string
	got, err := Referenced(Options{File: main, Content: content, Environ: []string{"INC_DIR=more"}}, func(p string) ([]byte, error) {
		read = append(read, p)
		return os.ReadFile(p)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sub/inc.yaml", "sub/.env", "more/other.yaml", "more/deep/base2.yaml", "other.env", "web.env", "base.yaml"}
	for _, w := range want {
		if !slices.Contains(got, filepath.Join(dir, w)) {
			t.Errorf("%s is not listed: %v", w, got)
		}
	}
	if len(got) != len(want) || !slices.Equal(got, read) {
		t.Errorf("listed %v, read %v", got, read)
	}
}
