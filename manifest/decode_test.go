package manifest_test

import (
	"strings"
	"testing"
)

// Strict decoding (design.md §3): unknown keys, wrong types and bad TOML are errors
// that name the file, the line and the key path.

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name:  "unknown top-level key",
			files: map[string]string{"sandbox.toml": img + "\nimgae = \"x\"\n"},
			// imgae is a key of [sandbox] here; the top level needs a table header first.
			want: []string{"sandbox.toml:4: sandbox.imgae: unknown key"},
		},
		{
			name:  "unknown top-level key before any table",
			files: map[string]string{"sandbox.toml": "# comment\nvolumes = [\"a\"]\n" + img},
			want:  []string{"sandbox.toml:2: volumes: unknown key (top-level keys are presets, tools, sandbox, env, mounts, copies, daemons, services, compose)"},
		},
		{
			name:  "unknown top-level table",
			files: map[string]string{"sandbox.toml": img + "[network]\nmode = \"host\"\n"},
			want:  []string{"sandbox.toml:3: network: unknown key (top-level keys are presets, tools, sandbox, env, mounts, copies, daemons, services, compose)"},
		},
		{
			name:  "unknown nested key",
			files: map[string]string{"sandbox.toml": "[sandbox]\nimage = \"x\"\nprivleged = true\n"},
			want:  []string{"sandbox.toml:3: sandbox.privleged: unknown key"},
		},
		{
			name:  "unknown key in sandbox.build",
			files: map[string]string{"sandbox.toml": "[sandbox.build]\ncontext = \".\"\ntarget = \"dev\"\n"},
			want:  []string{"sandbox.toml:3: sandbox.build.target: unknown key"},
		},
		{
			name:  "unknown key inside a daemon",
			files: map[string]string{"sandbox.toml": img + "[daemons.redis]\ncommand = [\"redis-server\"]\nrestarts = 3\n"},
			want:  []string{"sandbox.toml:5: daemons.redis.restarts: unknown key"},
		},
		{
			name:  "unknown key inside an inline ready table",
			files: map[string]string{"sandbox.toml": img + "[daemons.redis]\ncommand = [\"redis-server\"]\nready = { tcp = \"127.0.0.1:6379\", tries = 3 }\n"},
			want:  []string{"sandbox.toml:5: daemons.redis.ready.tries: unknown key"},
		},
		{
			name:  "unknown key inside a ready table",
			files: map[string]string{"sandbox.toml": img + "[daemons.redis]\ncommand = [\"redis-server\"]\n[daemons.redis.ready]\ntcp = \"127.0.0.1:6379\"\nport = 1\n"},
			want:  []string{"sandbox.toml:7: daemons.redis.ready.port: unknown key"},
		},
		{
			name:  "unknown key in a healthcheck, dotted key",
			files: map[string]string{"sandbox.toml": img + "[services.db]\nimage = \"pg\"\nhealthcheck.cmd = [\"true\"]\nhealthcheck.grace = \"1s\"\n"},
			want:  []string{"sandbox.toml:6: services.db.healthcheck.grace: unknown key"},
		},
		{
			name:  "unknown key in a mount and in a copy, both reported",
			files: map[string]string{"sandbox.toml": img + "[mounts.m]\nsource = \"a\"\ntarget = \"/a\"\nmode = \"ro\"\n[copies.c]\nsource = \"b\"\ntarget = \"/b\"\nexcludes = []\n"},
			want:  []string{"sandbox.toml:6: mounts.m.mode: unknown key", "sandbox.toml:10: copies.c.excludes: unknown key"},
		},
		{
			name:  "an unknown table is reported once, not key by key",
			files: map[string]string{"sandbox.toml": img + "[daemons.redis]\ncommand = [\"r\"]\n[daemons.redis.limits]\ncpu = 1\nmem = 2\n"},
			want:  []string{"sandbox.toml:5: daemons.redis.limits: unknown key"},
		},
		{
			name:  "keys are case-sensitive",
			files: map[string]string{"sandbox.toml": "[sandbox]\nImage = \"x\"\n"},
			want:  []string{"sandbox.toml:2: sandbox.Image: unknown key"},
		},
		{
			name: "case-mismatched key in a daemon does not shadow the preset's",
			files: map[string]string{
				"p.toml":       "[daemons.d]\ncommand = [\"preset\"]\n",
				"sandbox.toml": "presets = [\"./p.toml\"]\n" + img + "[daemons.d]\nCommand = [\"mine\"]\n",
			},
			want: []string{"sandbox.toml:5: daemons.d.Command: unknown key"},
		},
		{
			name:  "unknown key in sandbox.local.toml",
			files: map[string]string{"sandbox.toml": img, "sandbox.local.toml": "[env]\nA = \"1\"\n[sandbx]\nimage = \"y\"\n"},
			want:  []string{"sandbox.local.toml:3: sandbx: unknown key (top-level keys are presets, tools, sandbox, env, mounts, copies, daemons, services, compose)"},
		},
		{
			name:  "unknown key in a path preset",
			files: map[string]string{"sandbox.toml": "presets = [\"./p.toml\"]\n" + img, "p.toml": "\n[daemons.d]\ncommand = [\"d\"]\nsignals = \"SIGINT\"\n"},
			want:  []string{"p.toml:4: daemons.d.signals: unknown key"},
		},
		{
			name:  "wrong type: string for an integer",
			files: map[string]string{"sandbox.toml": img + "[daemons.d]\ncommand = [\"d\"]\ntimeout = \"10s\"\n"},
			want:  []string{"sandbox.toml:5: daemons.d.timeout: wrong type: expected an integer, got a string"},
		},
		{
			name:  "wrong type: string for an array",
			files: map[string]string{"sandbox.toml": img + "[daemons.d]\ncommand = \"redis-server --port 1\"\n"},
			want:  []string{"sandbox.toml:4: daemons.d.command: wrong type: expected an array, got a string"},
		},
		{
			name:  "wrong type: integer in env",
			files: map[string]string{"sandbox.toml": img + "[env]\nPORT = 5432\n"},
			want:  []string{"sandbox.toml:4: env.PORT: wrong type: expected a string, got an integer"},
		},
		{
			name:  "wrong type: string for a boolean",
			files: map[string]string{"sandbox.toml": "[sandbox]\nimage = \"x\"\nharden = \"yes\"\n"},
			want:  []string{"sandbox.toml:3: sandbox.harden: wrong type: expected a boolean, got a string"},
		},
		{
			name:  "wrong type: presets as a string",
			files: map[string]string{"sandbox.toml": "presets = \"redis\"\n" + img},
			want:  []string{"sandbox.toml:1: presets: wrong type: expected an array, got a string"},
		},
		{
			name:  "wrong type: a scalar where a table belongs",
			files: map[string]string{"sandbox.toml": img + "[daemons]\nredis = \"redis-server\"\n"},
			want:  []string{"sandbox.toml:4: daemons.redis: wrong type: expected a table, got a string"},
		},
		{
			name:  "wrong type: a date-time for a string",
			files: map[string]string{"sandbox.toml": "[sandbox]\nimage = 2024-01-01T00:00:00Z\n"},
			want:  []string{"sandbox.toml:2: sandbox.image: wrong type: expected a string, got a date-time"},
		},
		{
			name:  "wrong type: an array of tables where a table of entries belongs",
			files: map[string]string{"sandbox.toml": img + "\n[[daemons]]\n"},
			want:  []string{"sandbox.toml:4: daemons: wrong type: expected a table, got an array"},
		},
		{
			name:  "wrong type: an empty array for a table",
			files: map[string]string{"sandbox.toml": img + "[sandbox.build]\nargs = []\n[daemons.d]\ncommand = [\"d\"]\nenv = []\n"},
			want: []string{
				"sandbox.toml:4: sandbox.build.args: wrong type: expected a table, got an array",
				"sandbox.toml:7: daemons.d.env: wrong type: expected a table, got an array",
			},
		},
		{
			name:  "wrong type in a built-in preset's layer above it",
			files: map[string]string{"sandbox.toml": "presets = [\"redis\"]\n" + img, "sandbox.local.toml": "[daemons.redis]\nmax_restarts = 1.5\n"},
			want:  []string{"sandbox.local.toml:2: daemons.redis.max_restarts: wrong type: expected an integer, got a number"},
		},
		{
			name:  "bad TOML: unterminated string",
			files: map[string]string{"sandbox.toml": "[sandbox]\nimage = \"debian\n"},
			want:  []string{"sandbox.toml:2: "},
		},
		{
			name:  "bad TOML: duplicate key",
			files: map[string]string{"sandbox.toml": "[sandbox]\nimage = \"a\"\nimage = \"b\"\n"},
			want:  []string{"sandbox.toml:3: "},
		},
		{
			name:  "bad TOML in sandbox.local.toml",
			files: map[string]string{"sandbox.toml": img, "sandbox.local.toml": "[env]\n\nA = \n"},
			want:  []string{"sandbox.local.toml:3: "},
		},
		{
			name:  "bad TOML in a preset",
			files: map[string]string{"sandbox.toml": "presets = [\"./p.toml\"]\n" + img, "p.toml": "[env\n"},
			want:  []string{"p.toml:1: "},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := loadErr(t, tt.files)
			lines := strings.Split(got, "\n")
			if len(lines) != len(tt.want) {
				t.Errorf("got %d error lines, want %d:\n%s", len(lines), len(tt.want), got)
			}
			for _, w := range tt.want {
				if strings.HasSuffix(w, ": ") {
					// Syntax errors: the parser's own message; check the location.
					if !strings.HasPrefix(got, w) || len(got) <= len(w) {
						t.Errorf("error = %q, want it to start with %q and say what is wrong", got, w)
					}
					continue
				}
				wantLines(t, got, w)
			}
		})
	}
}
