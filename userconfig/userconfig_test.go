package userconfig

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/paths"
)

func TestMissingFileGivesDefaults(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.toml")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Exists || c.File != path {
		t.Fatalf("Exists=%v File=%q", c.Exists, c.File)
	}
	if c.Runtime.IdleTTL != 30*time.Minute || c.Runtime.EventRetentionTTL != 168*time.Hour || c.Runtime.LogLevel != "info" ||
		c.Runtime.StateRoot != "" || c.Artifacts.ExecOutputRoot != "" || c.Artifacts.ExecOutputTemplate != "{sandbox_id}/{exec_id}" ||
		c.Vault.Storage != "encrypted-file" {
		t.Fatalf("defaults: %+v", c)
	}
	p := &paths.Paths{DataDir: "/data/airlock"}
	if got := c.ExecOutputRoot(p); got != "/data/airlock/exec-output" {
		t.Fatalf("default exec output root %q", got)
	}
}

func TestFullConfig(t *testing.T) {
	t.Parallel()
	src := `# airlock user config
[runtime]
idle_ttl = "2h"
event_retention_ttl = "720h"
log_level = "debug"
state_root = "~/airlock-state"
pool_max = 20
shared_network_max = 250

[artifacts]
exec_output_root = "/var/tmp/exec"
exec_output_template = "logs/{sandbox_id}-{exec_id}"

[vault]
storage = "file"
`
	c, err := Parse("config.toml", []byte(src), "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	if c.Runtime.IdleTTL != 2*time.Hour || c.Runtime.EventRetentionTTL != 720*time.Hour || c.Runtime.LogLevel != "debug" ||
		c.Runtime.StateRoot != "/home/u/airlock-state" || c.Artifacts.ExecOutputRoot != "/var/tmp/exec" ||
		c.Vault.Storage != "file" || !c.Exists || c.Runtime.PoolMax != 20 || c.Runtime.SharedNetworkMax != 250 {
		t.Fatalf("%+v", c)
	}
	if c.SlogLevel().String() != "DEBUG" {
		t.Fatalf("slog level %v", c.SlogLevel())
	}
	p := &paths.Paths{DataDir: "/data/airlock"}
	if c.StateDir(p) != "/home/u/airlock-state" {
		t.Fatal(c.StateDir(p))
	}
	if c.ExecOutputRoot(p) != "/var/tmp/exec" || c.Artifacts.ExecOutputTemplate != "logs/{sandbox_id}-{exec_id}" {
		t.Fatalf("exec output root %q, template %q", c.ExecOutputRoot(p), c.Artifacts.ExecOutputTemplate)
	}
	// state_root moves the default exec output root along.
	c2, _ := Parse("config.toml", []byte("[runtime]\nstate_root = \"/srv/airlock\"\n"), "/home/u")
	if got := c2.ExecOutputRoot(p); got != "/srv/airlock/exec-output" {
		t.Fatal(got)
	}
}

func TestLoadReadsFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte("[vault]\nstorage = \"disabled\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadWithHome(path, "/home/u")
	if err != nil || c.Vault.Storage != "disabled" || !c.Exists {
		t.Fatalf("%+v %v", c, err)
	}
	if err := os.WriteFile(path, []byte("[vault]\nstorage = \"cloud\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if err == nil || !IsConfigError(err) || !strings.HasPrefix(err.Error(), path+":2: vault.storage: ") {
		t.Fatalf("got %v", err)
	}
	dir := t.TempDir()
	if _, err := Load(dir); err == nil || IsConfigError(err) {
		t.Fatalf("reading a folder: %v", err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, src, want string }{
		{"unknown table", "[runtme]\nidle_ttl = \"1m\"\n", "config.toml:1: runtme: unknown key (the tables are runtime, artifacts, vault, kubernetes, services and remote)"},
		{"bad remote command", "[remote]\ncommand = \"airlock; rm\"\n", "config.toml:2: remote.command: \"airlock; rm\" is not a command name or path (no spaces, quotes or shell characters)"},
		{"unknown key", "[runtime]\nidle_ttl = \"1m\"\nidle = \"1m\"\n", "config.toml:3: runtime.idle: unknown key"},
		{"unknown top key", "storage = \"file\"\n", "config.toml:1: storage: unknown key"},
		{"bad duration", "[runtime]\nidle_ttl = \"30\"\n", `config.toml:2: runtime.idle_ttl: invalid duration "30"`},
		{"zero duration", "[runtime]\nevent_retention_ttl = \"0s\"\n", `config.toml:2: runtime.event_retention_ttl: must be a positive duration, got "0s"`},
		{"negative duration", "[runtime]\nidle_ttl = \"-1m\"\n", `runtime.idle_ttl: must be a positive duration`},
		{"wrong type", "[runtime]\nidle_ttl = 30\n", "config.toml:2: runtime.idle_ttl: wrong type: expected a string, got an integer"},
		{"table expected", "runtime = 3\n", "config.toml:1: runtime: wrong type"},
		{"log level", "[runtime]\nlog_level = \"verbose\"\n", `config.toml:2: runtime.log_level: unknown log level "verbose" (want debug, info, warn or error)`},
		{"relative root", "[artifacts]\nexec_output_root = \"out\"\n", `config.toml:2: artifacts.exec_output_root: must be an absolute path`},
		{"relative state", "[runtime]\nstate_root = \"state\"\n", `config.toml:2: runtime.state_root: must be an absolute path`},
		{"template no exec", "[artifacts]\nexec_output_template = \"{sandbox_id}\"\n", "config.toml:2: artifacts.exec_output_template: must contain both {sandbox_id} and {exec_id}"},
		{"template dotdot", "[artifacts]\nexec_output_template = \"../{sandbox_id}/{exec_id}\"\n", `artifacts.exec_output_template: must not contain ".."`},
		{"template absolute", "[artifacts]\nexec_output_template = \"/{sandbox_id}/{exec_id}\"\n", `must be relative`},
		{"template unknown", "[artifacts]\nexec_output_template = \"{sandbox_id}/{exec_id}/{date}\"\n", `unknown placeholder {date}`},
		{"storage", "[vault]\nstorage = \"keychain\"\n", `config.toml:2: vault.storage: unknown storage "keychain" (want encrypted-file, file or disabled)`},
		{"pool_max too large", "[runtime]\npool_max = 1000\n", "config.toml:2: runtime.pool_max: must be between 0 and 256 (got 1000)"},
		{"pool_max negative", "[runtime]\npool_max = -1\n", "config.toml:2: runtime.pool_max: must be between 0 and 256 (got -1)"},
		{"shared_network_max too large", "[runtime]\nshared_network_max = 1023\n", "config.toml:2: runtime.shared_network_max: must be between 1 and 1020 (a bridge network holds at most 1023 containers; got 1023)"},
		{"creates_per_engine zero", "[runtime]\ncreates_per_engine = 0\n", "config.toml:2: runtime.creates_per_engine: must be between 1 and 256 (got 0)"},
		{"shared_network_max zero", "[runtime]\nshared_network_max = 0\n", "config.toml:2: runtime.shared_network_max: must be between 1 and 1020"},
		{"bad toml", "[runtime\nidle_ttl = \"1m\"\n", "config.toml:1: "},
		{"dotted", "runtime.idle_ttl = \"x\"\n", `config.toml:1: runtime.idle_ttl: invalid duration "x"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("config.toml", []byte(c.src), "/home/u")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if !IsConfigError(err) {
				t.Fatalf("%v is not a config error", err)
			}
		})
	}
}

func TestEveryProblemReported(t *testing.T) {
	t.Parallel()
	_, err := Parse("c.toml", []byte("[runtime]\nidle_ttl = \"x\"\nlog_level = \"loud\"\n[vault]\nstorage = \"?\"\nextra = 1\n"), "")
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "c.toml:2:") || !strings.HasPrefix(lines[3], "c.toml:6: vault.extra") {
		t.Fatalf("got:\n%v", err)
	}
}

// TestParseLogLevel: the one parser of log level names, for runtime.log_level,
// --log-level and the daemon's log.
func TestParseLogLevel(t *testing.T) {
	for name, want := range map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError} {
		if got, err := ParseLogLevel(name); err != nil || got != want {
			t.Errorf("ParseLogLevel(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, name := range []string{"", "loud", "DEBUG", "warning", "info+1"} {
		if got, err := ParseLogLevel(name); err == nil || got != slog.LevelInfo || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("ParseLogLevel(%q) = %v, %v; want info and an error naming it", name, got, err)
		}
	}
}
