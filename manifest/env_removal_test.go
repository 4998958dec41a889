package manifest_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

// Removing a variable a lower layer set (the postgres preset issue: "a preset's
// env entry can be removed, not only overridden"): in [env], daemons.<name>.env
// and services.<name>.env, NAME = false in a higher layer removes NAME. TOML has
// no null; false is the one value a variable cannot otherwise have.

const removalPreset = `
[env]
KEEP = "k"
DROP = "d"
[daemons.db]
command = ["db"]
env = { USER = "postgres", PASSWORD = "" }
[services.cache]
image = "redis:7"
env = { MODE = "lru", "odd.name" = "x" }
`

func TestEnvRemoval(t *testing.T) {
	r := load(t, map[string]string{
		"p.toml": removalPreset,
		"sandbox.toml": `presets = ["./p.toml"]
` + img + `
[env]
DROP = false
[daemons.db.env]
PASSWORD = false
[services.cache]
env = { "odd.name" = false }
`,
	})
	for _, c := range []struct {
		what      string
		got, want manifest.Env
	}{
		{"env", r.Env, manifest.Env{"KEEP": "k"}},
		{"daemons.db.env", r.Daemons["db"].Env, manifest.Env{"USER": "postgres"}},
		{"services.cache.env", r.Services["cache"].Env, manifest.Env{"MODE": "lru"}},
	} {
		if !maps.Equal(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	// A removed variable is gone from every output, config --layers included.
	for _, s := range r.Settings() {
		if s.Key == "env.DROP" || s.Key == "daemons.db.env.PASSWORD" || strings.Contains(s.Key, "odd.name") {
			t.Errorf("config --layers still lists %s = %s (%s)", s.Key, s.Value, s.Layer)
		}
	}
	out, err := r.TOML()
	if err != nil || strings.Contains(string(out), "DROP") || strings.Contains(string(out), "false\n[") {
		t.Errorf("TOML output (%v):\n%s", err, out)
	}
}

// TestEnvRemovalThenSetAgain: a layer above the removal may set the variable
// again; sandbox.local.toml may remove what sandbox.toml set.
func TestEnvRemovalThenSetAgain(t *testing.T) {
	r := load(t, map[string]string{
		"p.toml":             removalPreset,
		"sandbox.toml":       "presets = [\"./p.toml\"]\n" + img + "[env]\nDROP = false\nMINE = \"m\"\n",
		"sandbox.local.toml": "[env]\nDROP = \"local\"\nMINE = false\n",
	})
	if want := (manifest.Env{"KEEP": "k", "DROP": "local"}); !maps.Equal(r.Env, want) {
		t.Errorf("env = %v, want %v", r.Env, want)
	}
	layer := map[string]string{}
	for _, s := range r.Settings() {
		layer[s.Key] = s.Layer
	}
	if layer["env.DROP"] != "sandbox.local.toml:2" || !strings.HasSuffix(layer["env.KEEP"], "p.toml:3") {
		t.Errorf("config --layers: env.DROP from %q, env.KEEP from %q", layer["env.DROP"], layer["env.KEEP"])
	}
}

// TestEnvRemovalOfNothing: removing a variable that no lower layer sets is a
// config error at the removal's file and line (a misspelt name would otherwise
// remove nothing, silently), like enabled = false for an entry no layer defines.
// A variable an intermediate layer already removed counts as not set.
func TestEnvRemovalOfNothing(t *testing.T) {
	got := loadErr(t, map[string]string{
		"p.toml": removalPreset,
		"sandbox.toml": `presets = ["./p.toml"]
` + img + `
[env]
DORP = false
[daemons.db.env]
PASWORD = false
[daemons.other]
command = ["x"]
env = { A = false }
[services.cache.env]
"odd.nam" = false
`,
	})
	wantLines(t, got,
		"sandbox.toml:6: env.DORP: false removes a variable a lower layer set, but no lower layer sets env.DORP",
		"sandbox.toml:8: daemons.db.env.PASWORD: false removes a variable a lower layer set, but no lower layer sets daemons.db.env.PASWORD",
		"sandbox.toml:11: daemons.other.env.A: false removes a variable a lower layer set, but no lower layer sets daemons.other.env.A",
		`sandbox.toml:13: services.cache.env."odd.nam": false removes a variable a lower layer set, but no lower layer sets services.cache.env."odd.nam"`,
	)
	if n := strings.Count(got, "\n") + 1; n != 4 {
		t.Errorf("want 4 errors, got %d:\n%s", n, got)
	}

	got = loadErr(t, map[string]string{
		"p.toml":             removalPreset,
		"sandbox.toml":       "presets = [\"./p.toml\"]\n" + img + "[env]\nDROP = false\n",
		"sandbox.local.toml": "[env]\nDROP = false\n",
	})
	if want := "sandbox.local.toml:2: env.DROP: false removes a variable a lower layer set, but no lower layer sets env.DROP"; got != want {
		t.Errorf("a second removal:\n\tgot  %s\n\twant %s", got, want)
	}

	// In the lowest layer, false removes nothing either.
	got = loadErr(t, map[string]string{"sandbox.toml": img + "[env]\nX = false\n"})
	if want := "sandbox.toml:4: env.X: false removes a variable a lower layer set, but no lower layer sets env.X"; got != want {
		t.Errorf("a removal in the only layer:\n\tgot  %s\n\twant %s", got, want)
	}
}

// TestEnvRemovalOnlyFalse: false is the one non-string value a table of
// variables takes; true is an error that says what false does.
func TestEnvRemovalOnlyFalse(t *testing.T) {
	got := loadErr(t, map[string]string{"sandbox.toml": img + "[env]\nA = true\nB = 1\n[daemons.d]\ncommand = [\"d\"]\nenv = { C = false, D = [\"x\"] }\n"})
	wantLines(t, got,
		`sandbox.toml:4: env.A: wrong type: expected a string, got true (false removes a variable a lower layer set; write "true" for the text)`,
		"sandbox.toml:5: env.B: wrong type: expected a string, got an integer",
		"sandbox.toml:8: daemons.d.env.D: wrong type: expected a string, got an array",
	)
	// false is a removal only in a table of variables.
	got = loadErr(t, map[string]string{"sandbox.toml": img + "[sandbox.build]\nargs = { GO = false }\n"})
	if !strings.Contains(got, "sandbox.build.args.GO: wrong type: expected a string, got a boolean") {
		t.Errorf("false in build args: %s", got)
	}
}

// TestEnvRemovalBuiltinPreset: a project removes a built-in preset's variable.
func TestEnvRemovalBuiltinPreset(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": "presets = [\"postgres\"]\n" + img + "[env]\nPGPORT = false\n"})
	if _, ok := r.Env["PGPORT"]; ok || r.Env["PGHOST"] == "" {
		t.Errorf("env = %v", slices.Sorted(maps.Keys(r.Env)))
	}
}
