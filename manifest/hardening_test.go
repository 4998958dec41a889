package manifest_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

// Hardening against odd and absurd input: one spelling of key paths, no vault
// value in a host path, bounded numbers, no NUL byte, nested defaults.

func TestKeyPathSpelling(t *testing.T) {
	for _, tt := range []struct {
		parts []string
		want  string
	}{
		{[]string{"env", "TOKEN"}, "env.TOKEN"},
		{[]string{"daemons", "api-v2_x", "env", "A"}, "daemons.api-v2_x.env.A"},
		{[]string{"services", "db", "env", "my.var"}, `services.db.env."my.var"`},
		{[]string{"env", ""}, `env.""`},
		{[]string{"env", "MY VAR"}, `env."MY VAR"`},
		{[]string{"env", "a\"b\\c"}, `env."a\"b\\c"`},
		{[]string{"env", "A\u00a0B"}, `env."A\u00A0B"`},
		{[]string{"env", "A\x01B\x7fC"}, `env."A\u0001B\u007FC"`},
		{[]string{"env", "t\tn\nr\rb\bf\f"}, `env."t\tn\nr\rb\bf\f"`},
		{[]string{"env", "A\u2028B"}, `env."A\u2028B"`},
		{[]string{"env", "A\U000E0001B"}, `env."A\U000E0001B"`},
		{[]string{"env", "café→✓"}, `env."café→✓"`},
		{[]string{"env", "A\x00B"}, `env."A\u0000B"`},
	} {
		if got := manifest.KeyPath(tt.parts...); got != tt.want {
			t.Errorf("KeyPath(%q) = %s, want %s", tt.parts, got, tt.want)
		}
	}
	// Distinct names never share a key path.
	if manifest.KeyPath("A B") == manifest.KeyPath("A\u00a0B") || manifest.KeyPath("A\x01") == manifest.KeyPath(`A\u0001`) {
		t.Error("two names spelled the same")
	}
}

// oddNames are env names a service may have (the Engine takes any name without
// = or NUL) that need quoting in a key path.
var oddNames = []string{"my.var", "MY VAR", "A\u00a0B", "C\x01D", "tab\tname", "q\"b\\s", "line\u2028sep", "DEL\x7f"}

func TestKeyPathSourcesAgree(t *testing.T) {
	const secret = "s3cret-from-the-vault"
	var b strings.Builder
	b.WriteString(img + "[services.db]\nimage = \"pg\"\n[services.db.env]\n")
	for _, n := range oddNames {
		// The TOML spelling of a key is KeyPath's.
		b.WriteString(manifest.KeyPath(n) + " = \"${SECRET}\"\n")
	}
	b.WriteString("PLAIN = \"literal\"\n")
	p := newProject(t, map[string]string{"sandbox.toml": b.String()})
	p.vault.values["SECRET"] = secret
	r := p.mustLoad()

	masked, values := r.Redacted()
	for _, n := range oddNames {
		key := manifest.KeyPath("services", "db", "env", n)
		if r.Services["db"].Env[n] != secret {
			t.Errorf("services.db.env[%q] = %q, want the vault value", n, r.Services["db"].Env[n])
		}
		if r.Sources[key] != manifest.Vault {
			t.Errorf("Sources[%s] = %v, want vault (Sources: %q)", key, r.Sources[key], r.Sources)
		}
		if values[key] != secret || masked.Services["db"].Env[n] != manifest.Mask {
			t.Errorf("Redacted: %s = %q, masked %q", key, values[key], masked.Services["db"].Env[n])
		}
		if s := setting(t, r, key); s.Value != `"********"` {
			t.Errorf("Settings %s = %s, want masked", key, s.Value)
		}
	}
	if len(r.Sources) != len(oddNames) {
		t.Errorf("Sources = %q, want exactly the %d substituted names", r.Sources, len(oddNames))
	}
	// What the control daemon restores from the wire is the manifest again.
	back := manifest.Restore(masked, r.File, r.ProjectDir, r.Sources, values)
	if !reflect.DeepEqual(back.Manifest, r.Manifest) {
		t.Errorf("Restore(Redacted()) differs:\n%v\n%v", back.Services["db"].Env, r.Services["db"].Env)
	}
	if err := back.Validate(); err != nil {
		t.Errorf("Validate of a loaded manifest: %v", err)
	}

	// Errors on such keys name them as KeyPath does, on their own line.
	for _, key := range []string{`"A\u00A0B"`, "\"A\u00a0B\"", `"C\u0001D"`, `"tab\tname"`} {
		got := loadErr(t, map[string]string{"sandbox.toml": img + "[services.db]\nimage = \"pg\"\n[services.db.env]\nOK = \"1\"\n" + key + " = \"${NOPE}\"\n"})
		name := strings.NewReplacer(`\u00A0`, "\u00a0", `\u0001`, "\x01", `\t`, "\t").Replace(strings.Trim(key, `"`))
		want := "sandbox.toml:7: " + manifest.KeyPath("services", "db", "env", name) + ": NOPE is not set and not in the vault"
		if got != want {
			t.Errorf("key %s:\n\tgot  %s\n\twant %s", key, got, want)
		}
	}
}

func TestVaultValueInHostPath(t *testing.T) {
	const secret = "vault-path-never-shown"
	const msg = ": a value from the vault cannot be used in a host path (it would show in messages); use an environment variable"
	p := newProject(t, map[string]string{"sandbox.toml": img + `[mounts.cache]
source = "~/${CACHE_DIR}"
target = "/cache"
missing = "warn"
[copies.seed]
source = "${SEED:-./seed}"
target = "/seed"
[copies.plain]
source = "${PLAIN_DIR:-./plain}"
target = "/plain"
`})
	p.vault.values["CACHE_DIR"] = secret
	p.vault.values["SEED"] = secret
	got := p.loadErr()
	if strings.Contains(got, secret) {
		t.Errorf("the error shows the vault value:\n%s", got)
	}
	if want := "sandbox.toml:4: mounts.cache.source" + msg + "\nsandbox.toml:8: copies.seed.source" + msg; got != want {
		t.Errorf("error:\n\tgot  %s\n\twant %s", strings.ReplaceAll(got, "\n", "\n\t     "), strings.ReplaceAll(want, "\n", "\n\t     "))
	}

	// Values from the host environment stay allowed, and so do defaults.
	p.env["CACHE_DIR"] = "host-cache"
	p.env["SEED"] = "/srv/seed"
	r := p.mustLoad()
	if r.Mounts["cache"].Source != "~/host-cache" || r.Sources["mounts.cache.source"] != manifest.Host || r.Copies["plain"].Source != "./plain" {
		t.Errorf("mount %q (%v), copy %q", r.Mounts["cache"].Source, r.Sources["mounts.cache.source"], r.Copies["plain"].Source)
	}

	// The same rule for a manifest restored from the wire.
	r.Sources["copies.seed.source"] = manifest.Vault
	back := manifest.Restore(r.Manifest, r.File, r.ProjectDir, r.Sources, nil)
	if err := back.Validate(); err == nil || err.Error() != "copies.seed.source"+msg {
		t.Errorf("Validate: %v", err)
	}
}

// TestVaultValueInImage: sandbox.image is the one substituted key that reaches an
// Engine object's configuration as it is (Config.Image of the primary, shown by
// docker inspect): a vault value there is a config error naming the variable,
// also in a default; a host value stays allowed.
func TestVaultValueInImage(t *testing.T) {
	const secret = "vault-tag-never-shown"
	const rule = "a vault value cannot be used in an image reference (it would show in docker inspect); use an environment variable"
	const msg = " comes from the vault: " + rule
	for _, tt := range []struct{ name, image, want string }{
		{"a tag", "busybox:${TAG}", "sandbox.toml:2: sandbox.image: ${TAG}" + msg},
		{"in a default", "busybox:${NOPE:-${TAG}}", "sandbox.toml:2: sandbox.image: ${TAG}" + msg},
		{"two of them", "${REG}/busybox:${TAG}", "sandbox.toml:2: sandbox.image: ${REG}, ${TAG} come from the vault: " + rule},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newProject(t, map[string]string{"sandbox.toml": "[sandbox]\nimage = \"" + tt.image + "\"\n"})
			p.vault.values["TAG"] = secret
			p.vault.values["REG"] = "registry.example.com"
			got := p.loadErr()
			if strings.Contains(got, secret) {
				t.Errorf("the error shows the vault value:\n%s", got)
			}
			if got != tt.want {
				t.Errorf("error:\n\tgot  %s\n\twant %s", got, tt.want)
			}
		})
	}

	// A value from the host environment is the user's own: allowed.
	p := newProject(t, map[string]string{"sandbox.toml": "[sandbox]\nimage = \"busybox:${TAG}\"\n"})
	p.vault.values["TAG"] = secret
	p.env["TAG"] = "1.36"
	r := p.mustLoad()
	if r.Sandbox.Image != "busybox:1.36" || r.Sources["sandbox.image"] != manifest.Host {
		t.Errorf("image %q (%v)", r.Sandbox.Image, r.Sources["sandbox.image"])
	}

	// The same rule for a manifest restored from the wire (the daemon's API).
	r.Sources["sandbox.image"] = manifest.Vault
	back := manifest.Restore(r.Manifest, r.File, r.ProjectDir, r.Sources, nil)
	if err := back.Validate(); err == nil || err.Error() != "sandbox.image: "+rule {
		t.Errorf("Validate: %v", err)
	}
}

func TestAbsurdInputIsAConfigError(t *testing.T) {
	const daemon = img + "[daemons.d]\ncommand = [\"d\"]\n" // daemons.d at line 3
	const service = img + "[services.db]\nimage = \"pg\"\n" // services.db at line 3
	const nul = "must not contain a NUL byte"
	tests := []struct{ name, files, want string }{
		// numbers
		{"cpus 1e300", img + "cpus = 1e300\n", `sandbox.toml:3: sandbox.cpus: must be between 0.01 and 1024 (0 means no limit), got 1e+300`},
		{"cpus above 1024", img + "cpus = 1024.5\n", `sandbox.toml:3: sandbox.cpus: must be between 0.01 and 1024 (0 means no limit), got 1024.5`},
		{"cpus below the Engine's minimum", img + "cpus = 0.001\n", `sandbox.toml:3: sandbox.cpus: must be between 0.01 and 1024 (0 means no limit), got 0.001`},
		{"memory that overflows", img + "memory = \"99999999999t\"\n", `sandbox.toml:3: sandbox.memory: size "99999999999t" is above the maximum of 1024t (1 PiB)`},
		{"memory above 1 PiB", img + "memory = \"1025t\"\n", `sandbox.toml:3: sandbox.memory: size "1025t" is above the maximum of 1024t (1 PiB)`},
		{"memory below 6m", img + "memory = \"5m\"\n", `sandbox.toml:3: sandbox.memory: size "5m" is below the Engine's minimum of 6m (use 0 or "" for no limit)`},
		{"memory in bytes", img + "memory = \"4096\"\n", `sandbox.toml:3: sandbox.memory: size "4096" is below the Engine's minimum of 6m (use 0 or "" for no limit)`},
		{"ready_timeout above a year", img + "ready_timeout = \"8761h\"\n", `sandbox.toml:3: sandbox.ready_timeout: must be at most a year (8760h), got "8761h"`},
		{"daemon timeout MaxInt64", daemon + "timeout = 9223372036854775807\n", `sandbox.toml:5: daemons.d.timeout: must be at most 31536000 seconds (a year; 0 waits forever), got 9223372036854775807`},
		{"daemon timeout a year and a second", daemon + "timeout = 31536001\n", `sandbox.toml:5: daemons.d.timeout: must be at most 31536000 seconds (a year; 0 waits forever), got 31536001`},
		{"max_restarts", daemon + "max_restarts = 9223372036854775807\n", `sandbox.toml:5: daemons.d.max_restarts: must be at most 10000 (0 means no limit), got 9223372036854775807`},
		{"ready timeout", daemon + "ready = { log = \"x\", timeout = \"2562047h\" }\n", `sandbox.toml:5: daemons.d.ready.timeout: must be at most a year (8760h), got "2562047h"`},
		{"healthcheck interval", service + "healthcheck = { cmd = [\"true\"], interval = \"9000h\" }\n", `sandbox.toml:5: services.db.healthcheck.interval: must be at most a year (8760h), got "9000h"`},
		{"healthcheck timeout", service + "healthcheck = { cmd = [\"true\"], timeout = \"8760h1s\" }\n", `sandbox.toml:5: services.db.healthcheck.timeout: must be at most a year (8760h), got "8760h1s"`},
		{"healthcheck retries", service + "healthcheck = { cmd = [\"true\"], retries = 10001 }\n", `sandbox.toml:5: services.db.healthcheck.retries: must be at most 10000, got 10001`},
		// names the supervisor refuses
		{"daemon name of 64 characters", img + "[daemons." + strings.Repeat("d", 64) + "]\ncommand = [\"d\"]\n", `sandbox.toml:3: daemons.` + strings.Repeat("d", 64) + `: invalid name (at most 63 characters, got 64)`},
		{"after names a daemon twice", daemon + "after = [\"e\", \"e\"]\n[daemons.e]\ncommand = [\"e\"]\n", `sandbox.toml:5: daemons.d.after: names "e" twice`},
		{"env name with a dot", img + "[env]\n\"A.B\" = \"x\"\n", `sandbox.toml:4: env."A.B": invalid variable name (use letters, digits and _, not starting with a digit)`},
		{"env name with a non-breaking space", img + "[env]\n\"A\u00a0B\" = \"${S}\"\n", `sandbox.toml:4: env."A\u00A0B": invalid variable name (use letters, digits and _, not starting with a digit)`},
		{"daemon env name starting with a digit", daemon + "env = { 1X = \"x\" }\n", `sandbox.toml:5: daemons.d.env.1X: invalid variable name (use letters, digits and _, not starting with a digit)`},
		// NUL bytes
		{"NUL in a command", img + "[daemons.d]\ncommand = [\"d\", \"a\\u0000b\"]\n", `sandbox.toml:4: daemons.d.command: ` + nul + ` (element 1)`},
		{"NUL in an env value", img + "[env]\nA = \"x\\u0000y\"\n", `sandbox.toml:4: env.A: ` + nul},
		{"NUL in an env name", img + "[env]\n\"A\\u0000\" = \"x\"\n", `sandbox.toml:4: env."A\u0000": invalid variable name (use letters, digits and _, not starting with a digit)`},
		{"NUL in a service env name", service + "env = { \"A\\u0000\" = \"x\" }\n", `sandbox.toml:5: services.db.env."A\u0000": invalid variable name (it must not be empty or contain = or NUL)`},
		{"NUL in the image", "[sandbox]\nimage = \"debian\\u0000:12\"\n", `sandbox.toml:2: sandbox.image: ` + nul},
		{"NUL in the workdir", img + "workdir = \"/w\\u0000\"\n", `sandbox.toml:3: sandbox.workdir: ` + nul},
		{"NUL in the user", img + "user = \"dev\\u0000\"\n", `sandbox.toml:3: sandbox.user: ` + nul},
		{"NUL in the shell", img + "shell = [\"/bin/sh\\u0000\"]\n", `sandbox.toml:3: sandbox.shell: ` + nul + ` (element 0)`},
		{"NUL in a mount source", img + "[mounts.m]\nsource = \"./a\\u0000\"\ntarget = \"/m\"\n", `sandbox.toml:4: mounts.m.source: ` + nul},
		{"NUL in a mount target", img + "[mounts.m]\nsource = \"./a\"\ntarget = \"/m\\u0000\"\n", `sandbox.toml:5: mounts.m.target: ` + nul},
		{"NUL in a file_content", img + "[mounts.m]\nsource = \"./a\"\ntarget = \"/m\"\nmissing = \"create-file\"\nfile_content = \"\\u0000\"\n", `sandbox.toml:7: mounts.m.file_content: ` + nul},
		{"NUL in an exclude", img + "[copies.c]\nsource = \"./a\"\ntarget = \"/c\"\nexclude = [\"*\\u0000\"]\n", `sandbox.toml:6: copies.c.exclude: ` + nul + ` (element 0)`},
		{"NUL in a cwd", daemon + "cwd = \"/\\u0000\"\n", `sandbox.toml:5: daemons.d.cwd: ` + nul},
		{"NUL in a ready log", daemon + "ready = { log = \"up\\u0000\" }\n", `sandbox.toml:5: daemons.d.ready.log: ` + nul},
		{"NUL in a service command", service + "command = [\"\\u0000\"]\n", `sandbox.toml:5: services.db.command: ` + nul + ` (element 0)`},
		{"NUL in a healthcheck", service + "healthcheck = { cmd = [\"true\", \"\\u0000\"] }\n", `sandbox.toml:5: services.db.healthcheck.cmd: ` + nul + ` (element 1)`},
		{"NUL in a build arg", "[sandbox.build]\nargs = { A = \"\\u0000\" }\n", `sandbox.toml:2: sandbox.build.args.A: ` + nul},
		{"NUL in the dockerfile", "[sandbox.build]\ndockerfile = \"D\\u0000\"\n", `sandbox.toml:2: sandbox.build.dockerfile: ` + nul},
		// nested defaults
		{"nested default, unterminated", img + "[env]\nA = \"${X:-${Y}\"\n", `sandbox.toml:4: env.A: unterminated ${ at offset 0`},
		{"nested default, missing inner name", img + "[env]\nA = \"${X:-${Y}}\"\n", `sandbox.toml:4: env.A: Y is not set and not in the vault`},
		{"defaults nested too deep", img + "[env]\nA = \"" + strings.Repeat("${X:-", 9) + "x" + strings.Repeat("}", 9) + "\"\n", `sandbox.toml:4: env.A: ${ at offset 0 nests defaults more than 8 deep`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := loadErr(t, map[string]string{"sandbox.toml": tt.files}); got != tt.want {
				t.Errorf("error:\n\tgot  %s\n\twant %s", strings.ReplaceAll(got, "\n", "\n\t     "), tt.want)
			}
		})
	}

	t.Run("NUL in a substituted value", func(t *testing.T) {
		const secret = "vault\x00value"
		p := newProject(t, map[string]string{"sandbox.toml": img + "[env]\nA = \"${SECRET}\"\n[services.db]\nimage = \"pg\"\nenv = { B = \"x${SECRET}\" }\n"})
		p.vault.values["SECRET"] = secret
		got := p.loadErr()
		want := "sandbox.toml:4: env.A: must not contain a NUL byte (after substitution)\nsandbox.toml:7: services.db.env.B: must not contain a NUL byte (after substitution)"
		if got != want {
			t.Errorf("error:\n\tgot  %q\n\twant %q", got, want)
		}
	})
}

func TestBoundsAccepted(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": `[sandbox]
image = "x"
cpus = 1024
memory = "1024t"
ready_timeout = "8760h"
[daemons.` + strings.Repeat("d", 63) + `]
command = ["d"]
timeout = 31536000
max_restarts = 10000
ready = { log = "x", timeout = "8760h" }
[services.db]
image = "pg"
healthcheck = { cmd = ["true"], interval = "8760h", timeout = "1ms", retries = 10000 }
`})
	if n, err := manifest.ParseMemory(r.Sandbox.Memory); err != nil || n != manifest.MaxMemory {
		t.Errorf("ParseMemory(%q) = %d, %v", r.Sandbox.Memory, n, err)
	}
	for in, want := range map[string]int64{"0": 0, "6m": 6 << 20, "6291456": 6 << 20, "1.5GiB": 3 << 29, "0t": 0} {
		if n, err := manifest.ParseMemory(in); err != nil || n != want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	load(t, map[string]string{"sandbox.toml": img + "cpus = 0.01\nmemory = \"0\"\n"})
}

// TestValidateRestored: the control daemon validates what a client sends, with
// the rules of Load.
func TestValidateRestored(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": img + "[daemons.d]\ncommand = [\"d\"]\n[mounts.m]\nsource = \"./m\"\ntarget = \"/m\"\nmissing = \"ignore\"\n"})
	m, values := r.Redacted()
	restore := func(edit func(m *manifest.Manifest)) *manifest.Resolved {
		b, _ := json.Marshal(m)
		var c manifest.Manifest
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		edit(&c)
		return manifest.Restore(c, r.File, r.ProjectDir, r.Sources, values)
	}
	if err := restore(func(*manifest.Manifest) {}).Validate(); err != nil {
		t.Errorf("Validate of a valid manifest: %v", err)
	}
	bad := restore(func(m *manifest.Manifest) {
		m.Sandbox.CPUs = 1e300
		m.Sandbox.Memory = "99999999999t"
		d := m.Daemons["d"]
		d.Timeout = 1<<63 - 1
		d.Command = []string{"d", "\x00"}
		d.Signal = "SIGSTOP"
		m.Daemons["d"] = d
		m.Env = map[string]string{"A.B": "x"}
	})
	err := bad.Validate()
	if !manifest.IsConfigError(err) {
		t.Fatalf("Validate = %v, want config errors", err)
	}
	want := strings.Join([]string{
		`daemons.d.command: must not contain a NUL byte (element 1)`,
		`daemons.d.signal: unknown signal "SIGSTOP" (use one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL)`,
		`daemons.d.timeout: must be at most 31536000 seconds (a year; 0 waits forever), got 9223372036854775807`,
		`env."A.B": invalid variable name (use letters, digits and _, not starting with a digit)`,
		`sandbox.cpus: must be between 0.01 and 1024 (0 means no limit), got 1e+300`,
		`sandbox.memory: size "99999999999t" is above the maximum of 1024t (1 PiB)`,
	}, "\n")
	if err.Error() != want {
		t.Errorf("Validate:\n%s\nwant\n%s", err, want)
	}
}

func TestDecodeJSONIsStrict(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": rich})
	js, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.DecodeJSON(js)
	if err != nil || !reflect.DeepEqual(m, r.Masked()) {
		t.Errorf("DecodeJSON(JSON()) = %v; differs: %v", err, !reflect.DeepEqual(m, r.Masked()))
	}
	for in, want := range map[string]string{
		`{"sandbox":{"image":"x","bogus":1}}`: `json: unknown field "bogus"`,
		`{"daemons":{"d":{"timeout":"10s"}}}`: "cannot unmarshal",
		`{} {}`:                               "trailing data after the manifest",
	} {
		if _, err := manifest.DecodeJSON([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeJSON(%s) = %v, want an error with %q", in, err, want)
		}
	}
}
