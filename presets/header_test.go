package presets

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// TestHeadersNameTheEnvironment: every variable a built-in preset sets for
// the main command ([env]) is named in the preset's first lines (its header
// comment, what `airlock presets show` prints first), so that a client whose
// behaviour an environment variable changes (libpq and PGPASSWORD) finds it
// said there, with how to remove it.
func TestHeadersNameTheEnvironment(t *testing.T) {
	files, err := fs.Glob(FS, "*.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := fs.ReadFile(FS, f)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Env map[string]any `toml:"env"`
		}
		if _, err := toml.Decode(string(data), &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var header strings.Builder
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.HasPrefix(line, "#") {
				break
			}
			header.WriteString(line + "\n")
		}
		for k := range m.Env {
			if !strings.Contains(header.String(), k) {
				t.Errorf("%s sets %s for the main command but its first lines do not say so", f, k)
			}
		}
		if len(m.Env) > 0 && !strings.Contains(header.String(), "= false") {
			t.Errorf("%s sets variables but its first lines do not say how to remove one (NAME = false in [env])", f)
		}
	}
}
