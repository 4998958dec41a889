package manifest_test

import (
	"reflect"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

// The merge rules of design.md §4, across preset → sandbox.toml → sandbox.local.toml.

func TestMergeTablesKeyByKey(t *testing.T) {
	r := load(t, map[string]string{
		"team.toml": `
[sandbox]
image = "preset:1"
user = "preset-user"
[env]
FROM_PRESET = "p"
SHARED = "preset"
[daemons.web]
command = ["web"]
cwd = "/srv"
env = { A = "preset", B = "preset" }
`,
		"sandbox.toml": `
presets = ["./team.toml"]
[sandbox]
image = "main:1"
[env]
FROM_MAIN = "m"
SHARED = "main"
[daemons.web]
signal = "SIGINT"
env = { B = "main" }
`,
		"sandbox.local.toml": `
[env]
SHARED = "local"
[daemons.web.env]
C = "local"
`,
	})
	wantEnv := manifest.Env{"FROM_PRESET": "p", "FROM_MAIN": "m", "SHARED": "local"}
	if !reflect.DeepEqual(r.Env, wantEnv) {
		t.Errorf("env = %v, want %v", r.Env, wantEnv)
	}
	if r.Sandbox.Image != "main:1" || r.Sandbox.User != "preset-user" {
		t.Errorf("sandbox image, user = %q, %q; want main:1 (sandbox.toml wins), preset-user (kept from preset)", r.Sandbox.Image, r.Sandbox.User)
	}
	web := r.Daemons["web"]
	if !reflect.DeepEqual(web.Command, []string{"web"}) || web.Cwd != "/srv" || web.Signal != "SIGINT" {
		t.Errorf("daemons.web = command %v cwd %q signal %q; want [web] /srv SIGINT", web.Command, web.Cwd, web.Signal)
	}
	wantDaemonEnv := manifest.Env{"A": "preset", "B": "main", "C": "local"}
	if !reflect.DeepEqual(web.Env, wantDaemonEnv) {
		t.Errorf("daemons.web.env = %v, want %v", web.Env, wantDaemonEnv)
	}
}

func TestMergeScalarHigherLayerWins(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  func(r *manifest.Resolved) any
		value any
	}{
		{
			name: "local over main",
			files: map[string]string{
				"sandbox.toml":       img + "network = \"none\"\n",
				"sandbox.local.toml": "[sandbox]\nnetwork = \"host\"\n",
			},
			want:  func(r *manifest.Resolved) any { return r.Sandbox.Network },
			value: "host",
		},
		{
			name: "main over preset, boolean to false",
			files: map[string]string{
				"p.toml":       "[daemons.d]\ncommand = [\"d\"]\nharden = true\n",
				"sandbox.toml": "presets = [\"./p.toml\"]\n" + img + "[daemons.d]\nharden = false\n",
			},
			want:  func(r *manifest.Resolved) any { return r.Daemons["d"].Harden },
			value: false,
		},
		{
			name: "local over preset, integer",
			files: map[string]string{
				"p.toml":             "[daemons.d]\ncommand = [\"d\"]\ntimeout = 3\n",
				"sandbox.toml":       "presets = [\"./p.toml\"]\n" + img,
				"sandbox.local.toml": "[daemons.d]\ntimeout = 0\n",
			},
			want:  func(r *manifest.Resolved) any { return r.Daemons["d"].Timeout },
			value: 0,
		},
		{
			name: "later preset over earlier preset",
			files: map[string]string{
				"a.toml":       "[env]\nX = \"a\"\n",
				"b.toml":       "[env]\nX = \"b\"\n",
				"sandbox.toml": "presets = [\"./a.toml\", \"./b.toml\"]\n" + img,
			},
			want:  func(r *manifest.Resolved) any { return r.Env["X"] },
			value: "b",
		},
		{
			name: "local over main, float",
			files: map[string]string{
				"sandbox.toml":       img + "cpus = 1.5\n",
				"sandbox.local.toml": "[sandbox]\ncpus = 4\n",
			},
			want:  func(r *manifest.Resolved) any { return r.Sandbox.CPUs },
			value: 4.0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := load(t, tt.files)
			if got := tt.want(r); !reflect.DeepEqual(got, tt.value) {
				t.Errorf("got %#v, want %#v", got, tt.value)
			}
		})
	}
}

func TestMergeArrayHigherLayerReplaces(t *testing.T) {
	r := load(t, map[string]string{
		"p.toml": `
[sandbox]
shell = ["/bin/bash", "-l"]
[daemons.redis]
command = ["redis-server", "--save", "", "--port", "6379"]
after = ["other"]
[daemons.other]
command = ["other"]
[copies.seed]
source = "./seed"
target = "/seed"
exclude = [".git", "node_modules"]
[services.db]
image = "postgres:16"
command = ["postgres", "-c", "fsync=off"]
healthcheck = { cmd = ["pg_isready", "-U", "postgres"] }
`,
		"sandbox.toml": `
presets = ["./p.toml"]
[sandbox]
image = "x"
shell = ["/bin/zsh"]
[copies.seed]
exclude = []
[services.db]
healthcheck = { cmd = ["true"] }
`,
		"sandbox.local.toml": `
[daemons.redis]
command = ["redis-server"]
after = []
[services.db]
command = ["postgres"]
`,
	})
	checks := []struct {
		key       string
		got, want []string
	}{
		{"sandbox.shell", r.Sandbox.Shell, []string{"/bin/zsh"}},
		{"daemons.redis.command", r.Daemons["redis"].Command, []string{"redis-server"}},
		{"daemons.redis.after", r.Daemons["redis"].After, []string{}},
		{"copies.seed.exclude", r.Copies["seed"].Exclude, []string{}},
		{"services.db.command", r.Services["db"].Command, []string{"postgres"}},
		{"services.db.healthcheck.cmd", r.Services["db"].Healthcheck.Cmd, []string{"true"}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %q, want exactly %q", c.key, c.got, c.want)
		}
	}
}

func TestMergePresetsAndToolsAreOrderedUnions(t *testing.T) {
	r := load(t, map[string]string{
		"a.toml":             "tools = [\"git\", \"go-cache\"]\n",
		"b.toml":             "presets = [\"./a.toml\"]\ntools = [\"go-cache\", \"ssh-agent\"]\n",
		"sandbox.toml":       "presets = [\"./b.toml\", \"./a.toml\"]\ntools = [\"npm-cache\", \"git\"]\n" + img,
		"sandbox.local.toml": "presets = [\"./a.toml\", \"go\"]\ntools = [\"ssh-agent\", \"claude\"]\n",
	})
	// Lowest layer first: a, b, go (local's preset, still below sandbox.toml),
	// then sandbox.toml, then sandbox.local.toml; the go preset adds go, the
	// canonical name of go-cache, which therefore counts once.
	wantTools := []string{"git", "go", "ssh-agent", "npm", "claude"}
	if !reflect.DeepEqual(r.Tools, wantTools) {
		t.Errorf("tools = %q, want %q", r.Tools, wantTools)
	}
	seen := map[string]bool{}
	for _, p := range r.Presets {
		if seen[p] {
			t.Errorf("presets = %q: %q twice", r.Presets, p)
		}
		seen[p] = true
	}
	for _, want := range []string{"./a.toml", "./b.toml", "go"} {
		if !seen[want] {
			t.Errorf("presets = %q, lacks %q", r.Presets, want)
		}
	}
	if r.Env["GOTOOLCHAIN"] != "local" {
		t.Errorf("the go preset named in sandbox.local.toml was not applied: env = %v", r.Env)
	}
}

func TestMergeReadyKindReplacesOtherKind(t *testing.T) {
	preset := `
[daemons.web]
command = ["web"]
ready = { tcp = "127.0.0.1:8080", timeout = "5s" }
`
	tests := []struct {
		name      string
		main      string
		local     string
		wantKind  string
		wantReady manifest.Ready
	}{
		{
			name:      "http in sandbox.toml replaces tcp, keeps timeout",
			main:      "[daemons.web.ready]\nhttp = \"http://127.0.0.1:8080/health\"\n",
			wantKind:  "http",
			wantReady: manifest.Ready{HTTP: "http://127.0.0.1:8080/health", Timeout: "5s"},
		},
		{
			name:      "cmd in local replaces tcp",
			local:     "[daemons.web]\nready = { cmd = [\"curl\", \"-f\", \"localhost\"] }\n",
			wantKind:  "cmd",
			wantReady: manifest.Ready{Cmd: []string{"curl", "-f", "localhost"}, Timeout: "5s"},
		},
		{
			name:      "log in local replaces http of sandbox.toml",
			main:      "[daemons.web.ready]\nhttp = \"http://127.0.0.1:8080/\"\n",
			local:     "[daemons.web.ready]\nlog = \"listening on\"\ntimeout = \"9s\"\n",
			wantKind:  "log",
			wantReady: manifest.Ready{Log: "listening on", Timeout: "9s"},
		},
		{
			name:      "timeout alone keeps the lower kind",
			local:     "[daemons.web.ready]\ntimeout = \"1m\"\n",
			wantKind:  "tcp",
			wantReady: manifest.Ready{TCP: "127.0.0.1:8080", Timeout: "1m"},
		},
		{
			name:      "same kind replaces the value",
			main:      "[daemons.web.ready]\ntcp = \"127.0.0.1:9090\"\n",
			wantKind:  "tcp",
			wantReady: manifest.Ready{TCP: "127.0.0.1:9090", Timeout: "5s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{
				"p.toml":       preset,
				"sandbox.toml": "presets = [\"./p.toml\"]\n" + img + tt.main,
			}
			if tt.local != "" {
				files["sandbox.local.toml"] = tt.local
			}
			r := load(t, files)
			got := r.Daemons["web"].Ready
			if got == nil {
				t.Fatal("daemons.web.ready is nil")
			}
			if got.Kind() != tt.wantKind || !reflect.DeepEqual(*got, tt.wantReady) {
				t.Errorf("ready = %+v (kind %s), want %+v (kind %s)", *got, got.Kind(), tt.wantReady, tt.wantKind)
			}
		})
	}
}

func TestMergeEnabledFalseRemovesLowerEntry(t *testing.T) {
	preset := `
[mounts.cache]
source = "~/.cache"
target = "/cache"
[copies.seed]
source = "./seed"
target = "/seed"
[daemons.redis]
command = ["redis-server"]
[daemons.keep]
command = ["keep"]
[services.db]
image = "postgres:16"
`
	for _, entry := range []string{"mounts.cache", "copies.seed", "daemons.redis", "services.db"} {
		for _, layer := range []string{"sandbox.toml", "sandbox.local.toml"} {
			t.Run(entry+" in "+layer, func(t *testing.T) {
				files := map[string]string{
					"p.toml":       preset,
					"sandbox.toml": "presets = [\"./p.toml\"]\n" + img,
				}
				files[layer] += "[" + entry + "]\nenabled = false\n"
				r := load(t, files)
				present := map[string]bool{
					"mounts.cache":  r.Mounts["cache"].Source != "",
					"copies.seed":   r.Copies["seed"].Source != "",
					"daemons.redis": r.Daemons["redis"].Command != nil,
					"services.db":   r.Services["db"].Image != "",
				}
				for k, p := range present {
					if k == entry && p {
						t.Errorf("%s is still in the resolved manifest", k)
					}
					if k != entry && !p {
						t.Errorf("%s was removed too", k)
					}
				}
				if _, ok := r.Daemons["keep"]; !ok {
					t.Error("daemons.keep was removed too")
				}
				if hasSetting(r, entry+".enabled") {
					t.Errorf("config --layers still lists %s", entry)
				}
				out, err := r.TOML()
				if err != nil {
					t.Fatal(err)
				}
				if containsLine(string(out), "["+entry+"]") {
					t.Errorf("config output still has [%s]:\n%s", entry, out)
				}
			})
		}
	}
}

func TestMergeEnabledFalseThenTrueAgain(t *testing.T) {
	r := load(t, map[string]string{
		"p.toml":             "[daemons.redis]\ncommand = [\"redis-server\"]\n",
		"sandbox.toml":       "presets = [\"./p.toml\"]\n" + img + "[daemons.redis]\nenabled = false\n",
		"sandbox.local.toml": "[daemons.redis]\nenabled = true\n",
	})
	if d, ok := r.Daemons["redis"]; !ok || !d.Enabled {
		t.Errorf("daemons.redis re-enabled by sandbox.local.toml is missing: %+v", r.Daemons)
	}
}

func TestMergeEnabledFalseForUndefinedName(t *testing.T) {
	tests := []struct {
		entry, field string
	}{
		{"mounts.ghost", "source"},
		{"copies.ghost", "source"},
		{"daemons.ghost", "command"},
		{"services.ghost", "image"},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			got := loadErr(t, map[string]string{
				"sandbox.toml":       img,
				"sandbox.local.toml": "# overrides\n[" + tt.entry + "]\nenabled = false\n",
			})
			wantLines(t, got, "sandbox.local.toml:3: "+tt.entry+".enabled: enabled = false, but no layer defines "+tt.entry+" ("+tt.field+" is missing)")
		})
	}
}
