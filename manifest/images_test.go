package manifest_test

import (
	"strings"
	"testing"
)

// TestImageReferences: an image reference the Engine's grammar refuses is a
// config error at load (so at validate) naming the key and the line, and
// says which variable was empty when substitution made it.
func TestImageReferences(t *testing.T) {
	for _, c := range []struct{ toml, want string }{
		{"[sandbox]\nimage = \":latest\"\n", `sandbox.toml:2: sandbox.image: ":latest" is not an image reference`},
		{"[sandbox]\nimage = \"Bad Image\"\n", `sandbox.image: "Bad Image" is not an image reference`},
		{"[sandbox]\nimage = \"x\"\n[services.db]\nimage = \":latest\"\n", `sandbox.toml:4: services.db.image: ":latest" is not an image reference`},
		{"[sandbox]\nimage = \"${MSSQL_IMAGE:-}:latest\"\n", `sandbox.image: ":latest" (written "${MSSQL_IMAGE:-}:latest") is not an image reference (invalid reference format): ${MSSQL_IMAGE} is empty or not set`},
	} {
		p := newProject(t, map[string]string{"sandbox.toml": c.toml})
		if msg := p.loadErr(); !strings.Contains(msg, c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.toml, msg, c.want)
		}
	}
	for _, ok := range []string{"debian:bookworm", "localhost:5000/a/b:1", "redis@sha256:" + strings.Repeat("a", 64), "sha256:" + strings.Repeat("b", 64), "airlock-test/busybox:492f59dea99c"} {
		p := newProject(t, map[string]string{"sandbox.toml": "[sandbox]\nimage = \"" + ok + "\"\n"})
		if _, err := p.load(); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestRelativeWorkdir: a relative sandbox.workdir is the folder of that name
// in the project dir (a module in tests/ whose go.mod replaces ../).
func TestRelativeWorkdir(t *testing.T) {
	p := newProject(t, map[string]string{"sandbox.toml": "[sandbox]\nimage = \"x\"\nworkdir = \"tests\"\n"})
	r := p.mustLoad()
	if want := r.ProjectDir + "/tests"; r.Sandbox.Workdir != want {
		t.Errorf("workdir = %q, want %q", r.Sandbox.Workdir, want)
	}
}
