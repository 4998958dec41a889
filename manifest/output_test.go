package manifest_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

// `airlock config` output: the resolved manifest as TOML or JSON.

const rich = `presets = ["redis"]
tools = ["git", "go-cache"]
[sandbox]
image = "debian:bookworm"
shell = ["/bin/bash", "-l"]
memory = "2g"
cpus = 1.5
[sandbox.build]
args = { GO = "1.26", "A.B" = "x" }
[env]
DATABASE_URL = "postgres://app@db:5432/app"
DOLLAR = "$$5"
[mounts.cache]
source = "~/.cache/go-build"
target = "/root/.cache/go-build"
missing = "create-dir"
[copies."fixtures.v1"]
source = "./testdata/seed"
target = "/seed"
exclude = [".git"]
[daemons.web]
command = ["web", "--port", "8080"]
after = ["redis"]
ready = { http = "http://127.0.0.1:8080/health" }
env = { PORT = "8080" }
[services.db]
image = "postgres:16"
required = false
healthcheck = { cmd = ["pg_isready"], retries = 5 }
[services.db.env]
POSTGRES_PASSWORD = "${PGPASS:devonly}"
"WEIRD.NAME" = "q\"uote\\ and\nnewline"
`

func TestOutputTOMLRoundTrips(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": rich})
	out, err := r.TOML()
	if err != nil {
		t.Fatal(err)
	}
	// The output is itself a valid sandbox.toml that resolves to the same manifest
	// ($ doubled back so that substitution gives the same values).
	again := load(t, map[string]string{"sandbox.toml": strings.ReplaceAll(string(out), "$", "$$")})
	if !reflect.DeepEqual(again.Manifest, r.Manifest) {
		a, _ := json.MarshalIndent(r.Manifest, "", " ")
		b, _ := json.MarshalIndent(again.Manifest, "", " ")
		t.Errorf("TOML output does not resolve to the same manifest:\n%s\nfirst:\n%s\nagain:\n%s", out, a, b)
	}
}

func TestOutputJSONUsesTOMLKeyNames(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": rich})
	out, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := json.Unmarshal(out, &tree); err != nil {
		t.Fatal(err)
	}
	sandbox := tree["sandbox"].(map[string]any)
	for _, k := range []string{"image", "ready_timeout", "privileged", "build"} {
		if _, ok := sandbox[k]; !ok {
			t.Errorf("JSON sandbox lacks %q: %v", k, sandbox)
		}
	}
	web := tree["daemons"].(map[string]any)["web"].(map[string]any)
	for _, k := range []string{"max_restarts", "ready", "after", "env"} {
		if _, ok := web[k]; !ok {
			t.Errorf("JSON daemons.web lacks %q: %v", k, web)
		}
	}
	if ready := web["ready"].(map[string]any); !reflect.DeepEqual(ready, map[string]any{"http": "http://127.0.0.1:8080/health", "timeout": "30s"}) {
		t.Errorf("JSON daemons.web.ready = %v, want only the check that is set and its timeout", ready)
	}
	if !strings.HasSuffix(string(out), "}\n") {
		t.Error("JSON output does not end with a newline")
	}
}

func TestSettingsCoverEveryValue(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": rich})
	got := map[string]manifest.Setting{}
	for _, s := range r.Settings() {
		got[s.Key] = s
	}
	for key, want := range map[string]string{
		"tools":                             `["git", "go"]`,
		"sandbox.cpus":                      "1.5",
		"sandbox.build.args.GO":             `"1.26"`,
		`sandbox.build.args."A.B"`:          `"x"`,
		`services.db.env."WEIRD.NAME"`:      `"q\"uote\\ and\nnewline"`,
		"env.DOLLAR":                        `"$5"`,
		"mounts.cache.create_mode":          `"755"`,
		`copies."fixtures.v1".exclude`:      `[".git"]`,
		"daemons.web.after":                 `["redis"]`,
		"services.db.env.POSTGRES_PASSWORD": `"devonly"`,
		"services.db.healthcheck.retries":   "5",
		"services.db.required":              "false",
	} {
		if s, ok := got[key]; !ok || s.Value != want {
			t.Errorf("Settings %s = %s, want %s", key, s.Value, want)
		}
	}
	for _, s := range r.Settings() {
		if s.Layer == "" {
			t.Errorf("Settings %s has no layer", s.Key)
		}
	}
}

func TestLoadBytes(t *testing.T) {
	p := newProject(t, map[string]string{"team.toml": "[env]\nTEAM = \"1\"\n"})
	l := p.loader()
	r, err := l.LoadBytes("inline.toml", p.dir, []byte("presets = [\"./team.toml\", \"redis\"]\n"+img))
	if err != nil {
		t.Fatal(err)
	}
	if r.Env["TEAM"] != "1" || r.Daemons["redis"].Command == nil || r.ProjectDir != p.dir {
		t.Errorf("LoadBytes: env %v, daemons %v, project dir %q", r.Env, r.Daemons, r.ProjectDir)
	}
	_, err = l.LoadBytes("inline.toml", p.dir, []byte("[sandbox]\nimage = 1\n"))
	if err == nil || err.Error() != "inline.toml:2: sandbox.image: wrong type: expected a string, got an integer" {
		t.Errorf("LoadBytes error = %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	p := newProject(t, nil)
	_, err := p.load()
	if err == nil || manifest.IsConfigError(err) || !strings.Contains(err.Error(), "sandbox.toml") {
		t.Errorf("Load of a missing file: %v, want a read error naming the file", err)
	}
}
