package manifest_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

// Substitution and secrets (design.md §5).

func TestSubstitutionForms(t *testing.T) {
	tests := []struct {
		name, value, want string
		env               map[string]string
		vault             map[string]string
		source            manifest.Source
		asked             []string // when set: the names the vault was asked for, in order
	}{
		{name: "host", value: "${USER_NAME}", env: map[string]string{"USER_NAME": "ada"}, want: "ada", source: manifest.Host},
		{name: "in text", value: "pre-${A}-${B}.post", env: map[string]string{"A": "1", "B": "2"}, want: "pre-1-2.post", source: manifest.Host},
		{name: "host set to empty is set", value: "${EMPTY:fallback}", env: map[string]string{"EMPTY": ""}, want: "", source: manifest.Host},
		{name: "dash default when empty", value: "${EMPTY:-fallback}", env: map[string]string{"EMPTY": ""}, want: "fallback", source: manifest.Literal},
		{name: "default", value: "${PGPASS:devonly}", want: "devonly", source: manifest.Literal},
		{name: "dash default", value: "${PGPASS:-devonly}", want: "devonly", source: manifest.Literal},
		{name: "empty default", value: "x${NOPE:-}y", want: "xy", source: manifest.Literal},
		{name: "default with colon", value: "${URL:-http://localhost:80}", want: "http://localhost:80", source: manifest.Literal},
		{name: "default unused", value: "${PGPASS:-devonly}", env: map[string]string{"PGPASS": "real"}, want: "real", source: manifest.Host},
		{name: "vault", value: "${TOKEN}", vault: map[string]string{"TOKEN": "s3cret"}, want: "s3cret", source: manifest.Vault},
		{name: "host before vault", value: "${TOKEN}", env: map[string]string{"TOKEN": "fromhost"}, vault: map[string]string{"TOKEN": "s3cret"}, want: "fromhost", source: manifest.Host},
		{name: "vault over default", value: "${TOKEN:-none}", vault: map[string]string{"TOKEN": "s3cret"}, want: "s3cret", source: manifest.Vault},
		{name: "host and vault mixed is secret", value: "${U}:${P}", env: map[string]string{"U": "app"}, vault: map[string]string{"P": "pw"}, want: "app:pw", source: manifest.Vault},
		{name: "double dollar", value: "$${NOT_A_VAR} costs $$5", want: "${NOT_A_VAR} costs $5", source: manifest.Literal},
		{name: "lone dollar kept", value: "$HOME and $ and 5$", want: "$HOME and $ and 5$", source: manifest.Literal},
		{name: "no dollar", value: "plain", want: "plain", source: manifest.Literal},

		// Unset, empty and set, for both default forms and both places a value comes from.
		{name: "dash default when empty in the vault", value: "${T:-fallback}", vault: map[string]string{"T": ""}, want: "fallback", source: manifest.Literal},
		{name: "colon default not when empty in the vault", value: "${T:fallback}", vault: map[string]string{"T": ""}, want: "", source: manifest.Vault},
		{name: "colon default unused", value: "${T:fallback}", env: map[string]string{"T": "set"}, want: "set", source: manifest.Host},
		{name: "empty host value without default", value: "<${EMPTY}>", env: map[string]string{"EMPTY": ""}, want: "<>", source: manifest.Host},
		// Defaults nest, and are expanded by airlock's rules (not envsubst's).
		{name: "nested default", value: "${A:-${B:-x}}", want: "x", source: manifest.Literal},
		{name: "nested default from the host", value: "${A:-${B:-x}}", env: map[string]string{"B": "b"}, want: "b", source: manifest.Host},
		{name: "nested default when empty", value: "${A:-${B}}", env: map[string]string{"A": "", "B": "b"}, want: "b", source: manifest.Host},
		{name: "nested default from the vault", value: "${A:${B}}", vault: map[string]string{"B": "v"}, want: "v", source: manifest.Vault},
		{name: "colon default not when empty, nested unused", value: "${A:${B}}", env: map[string]string{"A": ""}, want: "", source: manifest.Host},
		{name: "brace after a nested default", value: "${A:-${B:-}}}", want: "}", source: manifest.Literal},
		{name: "dollar name in a default stays", value: "${NOPE:-$HOME}", env: map[string]string{"HOME": "/h"}, want: "$HOME", source: manifest.Literal},
		{name: "double dollar in a default", value: "${NOPE:-$${X}}", want: "${X}", source: manifest.Literal},
		{name: "colon in a nested default", value: "${A:-${B:-http://h:1}}", want: "http://h:1", source: manifest.Literal},
		// After ':' (other than ":-") everything is airlock's default, operators included.
		{name: "plus is part of a default", value: "${NOPE:+x}", want: "+x", source: manifest.Literal},
		{name: "plus default unused", value: "${A:+x}", env: map[string]string{"A": "a"}, want: "a", source: manifest.Host},
		{name: "equals is part of a default", value: "${NOPE:=x}", want: "=x", source: manifest.Literal},
		{name: "dash dash default", value: "${NOPE:--x}", want: "-x", source: manifest.Literal},
		{name: "underscore name", value: "${_}", env: map[string]string{"_": "u"}, want: "u", source: manifest.Host},
		{name: "value with dollar is not expanded", value: "${A}", env: map[string]string{"A": "${B}$$"}, want: "${B}$$", source: manifest.Host},
		// Nested defaults are looked up lazily: an inner name only when the outer is unset.
		{name: "inner from the host", value: "${A:-${B}}", env: map[string]string{"B": "b"}, want: "b", source: manifest.Host, asked: []string{"A"}},
		{name: "inner from the vault", value: "${A:-${B}}", vault: map[string]string{"B": "s"}, want: "s", source: manifest.Vault, asked: []string{"A", "B"}},
		{name: "outer set: inner never looked up", value: "${A:-${B}}", env: map[string]string{"A": "a"}, want: "a", source: manifest.Host},
		{name: "inner default", value: "${A:-${B:-x}}", want: "x", source: manifest.Literal, asked: []string{"A", "B"}},
		{name: "text around", value: "<${A:-pre-${B:-b}-post}>", want: "<pre-b-post>", source: manifest.Literal, asked: []string{"A", "B"}},
		{name: "airlock form", value: "${A:${B:c}}", want: "c", source: manifest.Literal, asked: []string{"A", "B"}},
		{name: "dollars in a default", value: "${A:-$$${B:-1}$$}", want: "$1$", source: manifest.Literal, asked: []string{"A", "B"}},
		{name: "brace after a default", value: "${A:-x}}", want: "x}", source: manifest.Literal, asked: []string{"A"}},
		{name: "eight deep", value: strings.Repeat("${A:-", 8) + "x" + strings.Repeat("}", 8), want: "x", source: manifest.Literal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProject(t, map[string]string{"sandbox.toml": img + "[env]\nV = '" + tt.value + "'\n"})
			for k, v := range tt.env {
				p.env[k] = v
			}
			for k, v := range tt.vault {
				p.vault.values[k] = v
			}
			r := p.mustLoad()
			if got := r.Env["V"]; got != tt.want {
				t.Errorf("env.V = %q, want %q", got, tt.want)
			}
			src, ok := r.Sources["env.V"]
			if tt.source == manifest.Literal && ok {
				t.Errorf("Sources[env.V] = %v, want no entry", src)
			}
			if tt.source != manifest.Literal && src != tt.source {
				t.Errorf("Sources[env.V] = %v, want %v", src, tt.source)
			}
			if tt.asked != nil && !reflect.DeepEqual(p.vault.calls(), tt.asked) {
				t.Errorf("the vault was asked %q, want %q", p.vault.calls(), tt.asked)
			}
		})
	}
}

func TestSubstitutionErrors(t *testing.T) {
	tests := []struct {
		name, files, want string
	}{
		{"missing in env", img + "[env]\nTOKEN = \"${GITHUB_TOKEN}\"\n",
			"sandbox.toml:4: env.TOKEN: GITHUB_TOKEN is not set and not in the vault"},
		{"missing in a daemon's env", img + "[daemons.d]\ncommand = [\"d\"]\n[daemons.d.env]\nPASS = \"x${DB_PASS}\"\n",
			"sandbox.toml:6: daemons.d.env.PASS: DB_PASS is not set and not in the vault"},
		{"missing in a service's env", img + "[services.db]\nimage = \"pg\"\nenv = { POSTGRES_PASSWORD = \"${PGPASS}\" }\n",
			"sandbox.toml:5: services.db.env.POSTGRES_PASSWORD: PGPASS is not set and not in the vault"},
		{"missing in sandbox.image", "[sandbox]\nimage = \"${IMAGE}\"\n",
			"sandbox.toml:2: sandbox.image: IMAGE is not set and not in the vault"},
		{"missing in a mount source", img + "[mounts.m]\nsource = \"${SRC}/x\"\ntarget = \"/x\"\n",
			"sandbox.toml:4: mounts.m.source: SRC is not set and not in the vault"},
		{"missing in a copy source", img + "[copies.c]\nsource = \"${SRC}\"\ntarget = \"/x\"\n",
			"sandbox.toml:4: copies.c.source: SRC is not set and not in the vault"},
		{"dotted env key is quoted", img + "[services.db]\nimage = \"pg\"\nenv = { \"A.B\" = \"${NOPE}\" }\n",
			`sandbox.toml:5: services.db.env."A.B": NOPE is not set and not in the vault`},
		{"unterminated", img + "[env]\nX = \"${NOPE\"\n",
			"sandbox.toml:4: env.X: unterminated ${ at offset 0"},
		{"bad name", img + "[env]\nX = \"a${1X}\"\n",
			`sandbox.toml:4: env.X: invalid variable name "1X" in ${1X}`},
		{"empty name", img + "[env]\nX = \"${}\"\n",
			`sandbox.toml:4: env.X: invalid variable name "" in ${}`},
		{"image empty after substitution", "[sandbox]\nimage = \"${IMAGE:-}\"\n",
			"sandbox.toml:2: sandbox.image: is empty after substitution"},
		{"missing in a used default", img + "[env]\nX = \"${A:-${NOPE}}\"\n",
			"sandbox.toml:4: env.X: NOPE is not set and not in the vault"},
		{"bad name in a used default", img + "[env]\nX = \"${A:-${B-x}}\"\n",
			`sandbox.toml:4: env.X: invalid variable name "B-x" in ${B-x}`},
		{"shell dash form is not airlock's", img + "[env]\nX = \"${A-x}\"\n",
			`sandbox.toml:4: env.X: invalid variable name "A-x" in ${A-x}`},
		{"unterminated nested", img + "[env]\nX = \"${A:-${B}\"\n",
			"sandbox.toml:4: env.X: unterminated ${ at offset 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := loadErr(t, map[string]string{"sandbox.toml": tt.files}); got != tt.want {
				t.Errorf("error:\n\tgot  %s\n\twant %s", got, tt.want)
			}
		})
	}
	t.Run("every missing name reported", func(t *testing.T) {
		got := loadErr(t, map[string]string{"sandbox.toml": img + "[env]\nA = \"${X1}\"\nB = \"${X2}\"\n", "sandbox.local.toml": "[env]\nC = \"${X3}\"\n"})
		wantLines(t, got,
			"sandbox.local.toml:2: env.C: X3 is not set and not in the vault",
			"sandbox.toml:4: env.A: X1 is not set and not in the vault",
			"sandbox.toml:5: env.B: X2 is not set and not in the vault")
	})
	t.Run("vault that cannot be read", func(t *testing.T) {
		p := newProject(t, map[string]string{"sandbox.toml": img + "[env]\nT = \"${TOKEN}\"\n"})
		p.vault.err = errVaultLocked
		if got, want := p.loadErr(), "sandbox.toml:4: env.T: TOKEN is not set and the vault cannot be read: vault is locked"; got != want {
			t.Errorf("error:\n\tgot  %s\n\twant %s", got, want)
		}
	})
}

func TestSubstitutionVaultConsultedOnlyWhenNeeded(t *testing.T) {
	p := newProject(t, map[string]string{"sandbox.toml": `[sandbox]
image = "debian:bookworm"
[env]
LITERAL = "no dollar here"
ESCAPED = "$$HOME"
FROM_HOST = "${HOST_ONLY}"
BOTH = "${IN_BOTH}"
SECRET = "${VAULT_ONLY}"
DEFAULTED = "${NOWHERE:-x}"
[daemons.d]
command = ["d", "${NOT_SUBSTITUTED}"]
env = { S = "${VAULT_ONLY}" }
`})
	p.env["HOST_ONLY"] = "h"
	p.env["IN_BOTH"] = "h2"
	p.vault.values["VAULT_ONLY"] = "v"
	p.vault.values["IN_BOTH"] = "never-used"
	r := p.mustLoad()
	calls := p.vault.calls()
	slices.Sort(calls)
	calls = slices.Compact(calls) // how often a name is asked is the loader's business
	// Names the host has (HOST_ONLY, IN_BOTH) and names in a daemon command are never asked.
	want := []string{"NOWHERE", "VAULT_ONLY"}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("vault asked for %q, want %q", calls, want)
	}
	if r.Env["BOTH"] != "h2" {
		t.Errorf("env.BOTH = %q, want the host value", r.Env["BOTH"])
	}

	// A manifest without any ${ never opens the vault.
	p2 := newProject(t, map[string]string{"sandbox.toml": img + "[env]\nA = \"1\"\nB = \"$$\"\n[mounts.m]\nsource = \"./m\"\ntarget = \"/m\"\n"})
	p2.mustLoad()
	if calls := p2.vault.calls(); len(calls) != 0 {
		t.Errorf("vault asked for %q by a manifest without variables", calls)
	}
	// Nor does a manifest that fails validation.
	p3 := newProject(t, map[string]string{"sandbox.toml": img + "network = \"bad\"\n[env]\nA = \"${SECRET}\"\n"})
	p3.loadErr()
	if calls := p3.vault.calls(); len(calls) != 0 {
		t.Errorf("vault asked for %q by an invalid manifest", calls)
	}
}

func TestSubstitutionPlaces(t *testing.T) {
	p := newProject(t, map[string]string{
		"sandbox.toml": `[sandbox]
image = "${REGISTRY}/app:1"
workdir = "/w/${X}"
shell = ["/bin/${X}"]
[sandbox.build]
args = { V = "${X}" }
[env]
E = "${X}"
[mounts.m]
source = "${X}/src"
target = "/m/${X}"
[copies.c]
source = "${X}/seed"
target = "/c/${X}"
exclude = ["${X}"]
[daemons.d]
command = ["run", "${X}"]
cwd = "/d/${X}"
env = { E = "${X}" }
ready = { log = "${X}" }
[services.s]
image = "img"
command = ["${X}"]
env = { E = "${X}" }
healthcheck = { cmd = ["${X}"] }
`,
	})
	p.env["REGISTRY"] = "reg.example"
	p.env["X"] = "sub"
	r := p.mustLoad()
	substituted := map[string]string{
		"sandbox.image":    r.Sandbox.Image,
		"env.E":            r.Env["E"],
		"mounts.m.source":  r.Mounts["m"].Source,
		"copies.c.source":  r.Copies["c"].Source,
		"daemons.d.env.E":  r.Daemons["d"].Env["E"],
		"services.s.env.E": r.Services["s"].Env["E"],
	}
	for k, v := range substituted {
		if strings.Contains(v, "${") {
			t.Errorf("%s = %q, want it substituted", k, v)
		}
		if r.Sources[k] != manifest.Host {
			t.Errorf("Sources[%s] = %v, want host", k, r.Sources[k])
		}
	}
	if r.Sandbox.Image != "reg.example/app:1" || r.Mounts["m"].Source != "sub/src" {
		t.Errorf("sandbox.image, mounts.m.source = %q, %q", r.Sandbox.Image, r.Mounts["m"].Source)
	}
	literal := map[string]string{
		"sandbox.workdir":            r.Sandbox.Workdir,
		"sandbox.shell":              r.Sandbox.Shell[0],
		"sandbox.build.args.V":       r.Sandbox.Build.Args["V"],
		"mounts.m.target":            r.Mounts["m"].Target,
		"copies.c.target":            r.Copies["c"].Target,
		"copies.c.exclude":           r.Copies["c"].Exclude[0],
		"daemons.d.command":          r.Daemons["d"].Command[1],
		"daemons.d.cwd":              r.Daemons["d"].Cwd,
		"daemons.d.ready.log":        r.Daemons["d"].Ready.Log,
		"services.s.command":         r.Services["s"].Command[0],
		"services.s.healthcheck.cmd": r.Services["s"].Healthcheck.Cmd[0],
	}
	for k, v := range literal {
		if !strings.Contains(v, "${X}") {
			t.Errorf("%s = %q, want ${X} kept literally (no substitution there)", k, v)
		}
	}
	if len(r.Sources) != len(substituted) {
		t.Errorf("Sources = %v, want exactly the %d substituted keys", r.Sources, len(substituted))
	}
	// A service's image is not substituted: ${X} there is no image.
	p.write(map[string]string{"sandbox.toml": "[sandbox]\nimage = \"x\"\n[services.s]\nimage = \"img/${X}\"\n"})
	if msg := p.loadErr(); !strings.Contains(msg, `services.s.image: "img/${X}" is not an image reference`) || !strings.Contains(msg, "not substituted") {
		t.Errorf("a service image with ${X}: %v", msg)
	}
}

func TestSecretsMasked(t *testing.T) {
	const secret = "hunter2-vault-value"
	p := newProject(t, map[string]string{"sandbox.toml": `[sandbox]
image = "${IMAGE}"
[env]
TOKEN = "Bearer ${GITHUB_TOKEN}"
HOSTV = "${CI_TOKEN}"
PLAIN = "plain"
[mounts.m]
source = "/home/${CI_TOKEN}"
target = "/m"
[copies.c]
source = "${CI_TOKEN}"
target = "/c"
[daemons.d]
command = ["d"]
env = { P = "${GITHUB_TOKEN}", H = "${CI_TOKEN}" }
[services.s]
image = "pg"
env = { P = "${GITHUB_TOKEN}" }
`})
	p.env["CI_TOKEN"] = "host-visible"
	p.vault.values["GITHUB_TOKEN"] = secret
	p.env["IMAGE"] = "private.registry/app" // a vault value is refused there (TestVaultValueInImage)
	r := p.mustLoad()

	// The resolved manifest holds the real values, for the processes that declared them.
	if r.Env["TOKEN"] != "Bearer "+secret || r.Daemons["d"].Env["P"] != secret {
		t.Fatalf("resolved values: env.TOKEN = %q, daemons.d.env.P = %q", r.Env["TOKEN"], r.Daemons["d"].Env["P"])
	}
	wantSources := map[string]manifest.Source{
		"sandbox.image": manifest.Host, "env.TOKEN": manifest.Vault, "env.HOSTV": manifest.Host,
		"mounts.m.source": manifest.Host, "copies.c.source": manifest.Host,
		"daemons.d.env.P": manifest.Vault, "daemons.d.env.H": manifest.Host, "services.s.env.P": manifest.Vault,
	}
	if !reflect.DeepEqual(r.Sources, wantSources) {
		t.Errorf("Sources = %v, want %v", r.Sources, wantSources)
	}

	tomlOut, err := r.TOML()
	if err != nil {
		t.Fatal(err)
	}
	jsonOut, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	settings, _ := json.Marshal(r.Settings())
	for name, out := range map[string]string{"TOML": string(tomlOut), "JSON": string(jsonOut), "Settings": string(settings)} {
		if strings.Contains(out, secret) {
			t.Errorf("%s output contains the vault value:\n%s", name, out)
		}
		if !strings.Contains(out, "host-visible") {
			t.Errorf("%s output hides the host value:\n%s", name, out)
		}
	}
	for _, line := range []string{`TOKEN = "********"`, `HOSTV = "host-visible"`, `PLAIN = "plain"`, `image = "private.registry/app"`, `source = "host-visible"`, `P = "********"`} {
		if !containsLine(string(tomlOut), line) {
			t.Errorf("TOML output lacks %s:\n%s", line, tomlOut)
		}
	}
	var decoded manifest.Manifest
	if err := json.Unmarshal(jsonOut, &decoded); err != nil {
		t.Fatal(err)
	}
	if decoded.Env["TOKEN"] != manifest.Mask || decoded.Services["s"].Env["P"] != manifest.Mask || decoded.Env["HOSTV"] != "host-visible" {
		t.Errorf("JSON env = %v, services.s.env = %v", decoded.Env, decoded.Services["s"].Env)
	}
	for key, want := range map[string]string{"env.TOKEN": `"********"`, "mounts.m.source": `"/home/host-visible"`, "daemons.d.env.H": `"host-visible"`} {
		if s := setting(t, r, key); s.Value != want {
			t.Errorf("Settings %s = %s, want %s", key, s.Value, want)
		}
	}
	// Masking does not change the resolved manifest.
	if r.Env["TOKEN"] != "Bearer "+secret || r.Services["s"].Env["P"] != secret || r.Mounts["m"].Source != "/home/host-visible" {
		t.Error("output masked the resolved manifest itself")
	}
}

func TestErrorsNeverContainVaultValues(t *testing.T) {
	const secret = "vault-value-never-shown"
	p := newProject(t, map[string]string{"sandbox.toml": `[sandbox]
image = "${SECRET}"
[env]
A = "${SECRET}"
B = "${SECRET}${MISSING}"
[mounts.m]
source = "${SECRET}"
target = "/m"
[daemons.d]
command = ["d"]
env = { X = "${SECRET}", Y = "${ALSO_MISSING}" }
`})
	p.vault.values["SECRET"] = secret
	got := p.loadErr()
	if strings.Contains(got, secret) {
		t.Errorf("error text contains the vault value:\n%s", got)
	}
	wantLines(t, got,
		"sandbox.toml:5: env.B: MISSING is not set and not in the vault",
		"sandbox.toml:11: daemons.d.env.Y: ALSO_MISSING is not set and not in the vault")
}

// TestSubstitutionMultiLineDefault: a default may span lines (envsubst's lexer
// refuses a newline inside ${…}; airlock expands defaults itself).
func TestSubstitutionMultiLineDefault(t *testing.T) {
	p := newProject(t, map[string]string{"sandbox.toml": img + "[env]\nV = \"${NOPE:-line1\\nline2}\"\nW = \"${SET:-a\\nb}\"\n"})
	p.env["SET"] = "one\ntwo"
	r := p.mustLoad()
	if r.Env["V"] != "line1\nline2" || r.Env["W"] != "one\ntwo" {
		t.Errorf("env.V = %q, env.W = %q", r.Env["V"], r.Env["W"])
	}
}

// TestSubstitutionDefaultsLookedUpLazily: a default's variables are looked up
// only when the default is used, and a used default is looked up in turn.
func TestSubstitutionDefaultsLookedUpLazily(t *testing.T) {
	p := newProject(t, map[string]string{"sandbox.toml": img + `[env]
A = "${SET:-${NOT_ASKED_1}}"
B = "${EMPTY:${NOT_ASKED_2}}"
C = "${EMPTY:-${ASKED_1:-x}}"
D = "${UNSET:${ASKED_2:-y}}"
E = "${VAULT_EMPTY:-${ASKED_3:-z}}"
`})
	p.env["SET"] = "s"
	p.env["EMPTY"] = ""
	p.vault.values["VAULT_EMPTY"] = ""
	r := p.mustLoad()
	calls := p.vault.calls()
	slices.Sort(calls)
	calls = slices.Compact(calls)
	if want := []string{"ASKED_1", "ASKED_2", "ASKED_3", "UNSET", "VAULT_EMPTY"}; !reflect.DeepEqual(calls, want) {
		t.Errorf("vault asked for %q, want %q", calls, want)
	}
	want := manifest.Env{"A": "s", "B": "", "C": "x", "D": "y", "E": "z"}
	if !reflect.DeepEqual(r.Env, want) {
		t.Errorf("env = %q, want %q", r.Env, want)
	}
}
