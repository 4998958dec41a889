package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// An env file outside the project (a compose service's env_file, or
// services.*.env_file) is a config error naming the key, the file and the
// line, and nothing of it is read or shown, unless the user's config.toml
// names it ([services] env_files_outside); a bad value there stops as other
// config errors do.
func TestEnvFileOutsideProject(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "shadow")
	writeFile(t, outside, "STOLEN=t0p-secret-value\n")
	for _, tt := range []struct {
		name, manifest, compose, where string
	}{
		{"compose", "[compose]\nfile = \"compose.yaml\"\n",
			"services:\n  db:\n    image: x\n    env_file: " + outside + "\n", "compose.yaml:4: services.db.env_file: "},
		{"compose list", "[compose]\nfile = \"compose.yaml\"\n",
			"services:\n  db:\n    image: x\n    env_file:\n      - ./in.env\n      - ../" + filepath.Base(filepath.Dir(outside)) + "/shadow\n", "compose.yaml:6: services.db.env_file: "},
		{"services", "[services.db]\nimage = \"x\"\nenv_file = [\"" + outside + "\"]\n", "", "sandbox.toml:5: services.db.env_file: "},
	} {
		dir := project(t, "[sandbox]\nimage = \"x\"\n"+tt.manifest)
		writeFile(t, filepath.Join(dir, "in.env"), "INSIDE=fine\n")
		if tt.compose != "" {
			if tt.name == "compose list" {
				// ../<dir of outside>/shadow from a project beside it.
				dir = filepath.Join(filepath.Dir(filepath.Dir(outside)), "proj-"+strings.ReplaceAll(tt.name, " ", "-"))
				writeFile(t, filepath.Join(dir, "sandbox.toml"), "[sandbox]\nimage = \"x\"\n"+tt.manifest)
				writeFile(t, filepath.Join(dir, "in.env"), "INSIDE=fine\n")
			}
			writeFile(t, filepath.Join(dir, "compose.yaml"), tt.compose)
		}
		for _, cmd := range []string{"config", "validate"} {
			r := airlock(t, nil, "--file", dir, cmd)
			if r.code != ExitUsage || !strings.HasPrefix(r.stderr, "config error: ") || !strings.Contains(r.stderr, tt.where) ||
				!strings.Contains(r.stderr, outside) || !strings.Contains(r.stderr, "env_files_outside") {
				t.Errorf("%s, %s: exit %d, stderr %q; want exit 2 and a config error %q… naming %s and env_files_outside", tt.name, cmd, r.code, r.stderr, tt.where, outside)
			}
			if strings.Contains(r.stdout+r.stderr, "t0p-secret") {
				t.Errorf("%s, %s: the outside file's value is shown:\n%s%s", tt.name, cmd, r.stdout, r.stderr)
			}
		}
		// Named in config.toml, it is read.
		home := t.TempDir()
		writeFile(t, filepath.Join(home, "config", "airlock", "config.toml"), "[services]\nenv_files_outside = [\""+outside+"\"]\n")
		r := airlock(t, map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "config")}, "--file", dir, "config")
		if r.code != 0 || !strings.Contains(r.stdout, "t0p-secret-value") {
			t.Errorf("%s, allowed in config.toml: exit %d, stdout %q, stderr %q", tt.name, r.code, r.stdout, r.stderr)
		}
	}
	// A bad value in config.toml is a config error of config.toml.
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "config", "airlock", "config.toml"), "[services]\nenv_files_outside = [\"relative/shadow\"]\n")
	r := airlock(t, map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "config")}, "--file", project(t, "[sandbox]\nimage = \"x\"\n"), "config")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "config.toml:2: services.env_files_outside: ") || !strings.Contains(r.stderr, "relative/shadow") {
		t.Errorf("a relative path in env_files_outside: exit %d, stderr %q", r.code, r.stderr)
	}
}
