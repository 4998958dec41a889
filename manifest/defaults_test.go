package manifest_test

import (
	"reflect"
	"testing"
	"testing/fstest"

	"github.com/airlock-dev/airlock/manifest"
)

// Defaults of design.md §3, applied after the layers merge, and `config --layers`
// naming them "default" and set values file:line.

const everyEntry = `[sandbox]
image = "debian:bookworm"
[mounts.dir]
source = "./d"
target = "/d"
missing = "create-dir"
[mounts.file]
source = "./f"
target = "/f"
missing = "create-file"
[mounts.plain]
source = "./p"
target = "/p"
[copies.seed]
source = "./seed"
target = "/seed"
[daemons.redis]
command = ["redis-server"]
ready = { tcp = "127.0.0.1:6379" }
[services.db]
image = "postgres:16"
healthcheck = { cmd = ["pg_isready"] }
[sandbox.build]
`

func TestDefaults(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": everyEntry})
	tests := []struct {
		key       string
		got, want any
	}{
		{"presets", r.Presets, []string{}},
		{"tools", r.Tools, []string{}},
		{"sandbox.harden", r.Sandbox.Harden, true},
		{"sandbox.privileged", r.Sandbox.Privileged, false},
		{"sandbox.network", r.Sandbox.Network, "bridge"},
		{"sandbox.ready_timeout", r.Sandbox.ReadyTimeout, "60s"},
		{"sandbox.workdir", r.Sandbox.Workdir, ""},
		{"sandbox.user", r.Sandbox.User, ""},
		{"sandbox.shell", r.Sandbox.Shell, []string{}},
		{"sandbox.cpus", r.Sandbox.CPUs, 0.0},
		{"sandbox.memory", r.Sandbox.Memory, ""},
		{"sandbox.build.context", r.Sandbox.Build.Context, "."},
		{"sandbox.build.dockerfile", r.Sandbox.Build.Dockerfile, "Dockerfile"},

		{"mounts.plain.enabled", r.Mounts["plain"].Enabled, true},
		{"mounts.plain.read_only", r.Mounts["plain"].ReadOnly, false},
		{"mounts.plain.missing", r.Mounts["plain"].Missing, "fail"},
		{"mounts.plain.create_mode", r.Mounts["plain"].CreateMode, ""},
		{"mounts.plain.file_content", r.Mounts["plain"].FileContent, ""},
		{"mounts.dir.create_mode", r.Mounts["dir"].CreateMode, "755"},
		{"mounts.file.create_mode", r.Mounts["file"].CreateMode, "644"},

		{"copies.seed.enabled", r.Copies["seed"].Enabled, true},
		{"copies.seed.exclude", r.Copies["seed"].Exclude, []string{}},

		{"daemons.redis.enabled", r.Daemons["redis"].Enabled, true},
		{"daemons.redis.cwd", r.Daemons["redis"].Cwd, "/"},
		{"daemons.redis.signal", r.Daemons["redis"].Signal, "SIGTERM"},
		{"daemons.redis.timeout", r.Daemons["redis"].Timeout, 10},
		{"daemons.redis.restart", r.Daemons["redis"].Restart, "always"},
		{"daemons.redis.max_restarts", r.Daemons["redis"].MaxRestarts, 10},
		{"daemons.redis.harden", r.Daemons["redis"].Harden, true},
		{"daemons.redis.after", r.Daemons["redis"].After, []string{}},
		{"daemons.redis.ready.timeout", r.Daemons["redis"].Ready.Timeout, "30s"},

		{"services.db.enabled", r.Services["db"].Enabled, true},
		{"services.db.required", r.Services["db"].Required, true},
		{"services.db.command", r.Services["db"].Command, []string{}},
		{"services.db.healthcheck.interval", r.Services["db"].Healthcheck.Interval, "1s"},
		{"services.db.healthcheck.timeout", r.Services["db"].Healthcheck.Timeout, "3s"},
		{"services.db.healthcheck.retries", r.Services["db"].Healthcheck.Retries, 30},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s = %#v, want the default %#v", tt.key, tt.got, tt.want)
		}
		if s := setting(t, r, tt.key); s.Layer != "default" {
			t.Errorf("config --layers: %s comes from %q, want \"default\"", tt.key, s.Layer)
		}
	}
}

func TestDefaultsDoNotOverrideSetValues(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": `[sandbox]
image = "debian:bookworm"
harden = false
network = "none"
ready_timeout = "2m"
[mounts.dir]
source = "./d"
target = "/d"
missing = "create-dir"
create_mode = "700"
[daemons.redis]
command = ["redis-server"]
cwd = "/data"
signal = "SIGQUIT"
timeout = 0
restart = "on-failure"
max_restarts = 0
harden = false
ready = { log = "ready", timeout = "1s" }
[services.db]
image = "postgres:16"
required = false
healthcheck = { cmd = ["true"], interval = "2s", timeout = "4s", retries = 0 }
`})
	d := r.Daemons["redis"]
	got := []any{r.Sandbox.Harden, r.Sandbox.Network, r.Sandbox.ReadyTimeout, r.Mounts["dir"].CreateMode,
		d.Cwd, d.Signal, d.Timeout, d.Restart, d.MaxRestarts, d.Harden, d.Ready.Timeout,
		r.Services["db"].Required, *r.Services["db"].Healthcheck}
	want := []any{false, "none", "2m", "700",
		"/data", "SIGQUIT", 0, "on-failure", 0, false, "1s",
		false, manifest.Healthcheck{Cmd: []string{"true"}, Interval: "2s", Timeout: "4s", Retries: 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
}

func TestSettingsNameTheLayer(t *testing.T) {
	p := newProject(t, map[string]string{
		"p.toml": `# a preset
[daemons.redis]
command = ["redis-server"]
signal = "SIGINT"
`,
		"sandbox.toml": `presets = ["./p.toml", "redis"]

[sandbox]
image = "debian:bookworm"

[env]
A = "main"
B_C = "underscored"
`,
		"sandbox.local.toml": `[sandbox]
network = "none"
[daemons.redis]
timeout = 3
`,
	})
	p.builtin = fstest.MapFS{"redis.toml": {Data: []byte(`# Redis

[env]
REDIS_URL = "redis://127.0.0.1:6379/0"

[daemons.redis]
command = ["redis-server", "--port", "6379"]
signal = "SIGTERM"
ready = { tcp = "127.0.0.1:6379" }
`)}}
	r := p.mustLoad()
	tests := []struct{ key, value, layer string }{
		{"sandbox.image", `"debian:bookworm"`, "sandbox.toml:4"},
		{"sandbox.network", `"none"`, "sandbox.local.toml:2"},
		{"sandbox.harden", "true", "default"},
		{"env.A", `"main"`, "sandbox.toml:7"},
		{"env.B_C", `"underscored"`, "sandbox.toml:8"},
		// The built-in redis preset comes after p.toml, so its values win.
		{"env.REDIS_URL", `"redis://127.0.0.1:6379/0"`, "preset redis:4"},
		{"daemons.redis.command", `["redis-server", "--port", "6379"]`, "preset redis:7"},
		{"daemons.redis.signal", `"SIGTERM"`, "preset redis:8"},
		{"daemons.redis.timeout", "3", "sandbox.local.toml:4"},
		{"daemons.redis.cwd", `"/"`, "default"},
		{"daemons.redis.ready.tcp", `"127.0.0.1:6379"`, "preset redis:9"},
		{"daemons.redis.ready.timeout", `"30s"`, "default"},
	}
	for _, tt := range tests {
		s := setting(t, r, tt.key)
		if s.Value != tt.value || s.Layer != tt.layer {
			t.Errorf("%s = %s from %s, want %s from %s", tt.key, s.Value, s.Layer, tt.value, tt.layer)
		}
	}
	// A value set only by a path preset names that file.
	r2 := newProject(t, map[string]string{
		"p.toml":       "# a preset\n[daemons.x]\ncommand = [\"x\"]\nsignal = \"SIGINT\"\n",
		"sandbox.toml": "presets = [\"./p.toml\"]\n" + img,
	}).mustLoad()
	if s := setting(t, r2, "daemons.x.signal"); s.Layer != "p.toml:4" {
		t.Errorf("daemons.x.signal comes from %q, want p.toml:4", s.Layer)
	}
	// Settings are sorted by key and list each key once.
	all := r.Settings()
	for i := 1; i < len(all); i++ {
		if all[i-1].Key >= all[i].Key {
			t.Errorf("Settings not sorted or duplicated: %s then %s", all[i-1].Key, all[i].Key)
		}
	}
}

func TestSettingsDefaultFileNames(t *testing.T) {
	// Without Display, files are named by their absolute path.
	p := newProject(t, map[string]string{"sandbox.toml": "\n" + img})
	l := p.loader()
	l.Display = nil
	r, err := l.Load(p.dir + "/sandbox.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s := setting(t, r, "sandbox.image"); s.Layer != p.dir+"/sandbox.toml:3" {
		t.Errorf("sandbox.image comes from %q, want %s/sandbox.toml:3", s.Layer, p.dir)
	}
	if r.File != p.dir+"/sandbox.toml" || r.ProjectDir != p.dir {
		t.Errorf("File, ProjectDir = %q, %q", r.File, r.ProjectDir)
	}
}
