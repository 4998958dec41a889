package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// result is what one in-process invocation of airlock printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

// airlock runs the CLI in-process with a hermetic environment: HOME and the XDG
// folders point into a temporary directory, plus env.
func airlock(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	home := t.TempDir()
	vars := map[string]string{
		"HOME":            home,
		"XDG_CONFIG_HOME": filepath.Join(home, "config"),
		"XDG_DATA_HOME":   filepath.Join(home, "data"),
	}
	for k, v := range env {
		vars[k] = v
	}
	getenv := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb, getenv)
	return result{code, out.String(), errb.String()}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func project(t *testing.T, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "sandbox.toml"), manifest)
	return dir
}

func TestValidateExitCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, manifest string
		code           int
		stderr         string
	}{
		{"valid", "[sandbox]\nimage = \"busybox\"\n", 0, ""},
		{"unknown key", "[sandbox]\nimage = \"busybox\"\nimagee = 1\n", 2, "/sandbox.toml:3: sandbox.imagee: unknown key"},
		{"bad signal", "[sandbox]\nimage = \"b\"\n[daemons.redis]\ncommand = [\"redis-server\"]\nsignal = \"SIGBOGUS\"\n", 2,
			`/sandbox.toml:5: daemons.redis.signal: unknown signal "SIGBOGUS"`},
		{"bad toml", "[sandbox\nimage = 1\n", 2, "sandbox.toml:"},
		{"wrong type", "[sandbox]\nimage = 3\n", 2, "/sandbox.toml:2: sandbox.image: wrong type: expected a string, got an integer"},
		{"missing variable", "[sandbox]\nimage = \"b\"\n[env]\nTOKEN = \"${GITHUB_TOKEN}\"\n", 2,
			"/sandbox.toml:4: env.TOKEN: GITHUB_TOKEN is not set and not in the vault"},
		{"unknown preset", "presets = [\"nope\"]\n[sandbox]\nimage = \"b\"\n", 2, `/sandbox.toml:1: presets: unknown preset "nope"`},
		{"unknown tool", "tools = [\"hammer\"]\n[sandbox]\nimage = \"b\"\n", 2, `/sandbox.toml:1: tools: unknown tool "hammer"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := project(t, c.manifest)
			r := airlock(t, nil, "--file", filepath.Join(dir, "sandbox.toml"), "validate")
			if r.code != c.code {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", r.code, c.code, r.stderr)
			}
			if c.code == 2 && !strings.HasPrefix(r.stderr, "config error: ") {
				t.Fatalf("stderr %q does not start with \"config error: \"", r.stderr)
			}
			if c.stderr != "" && !strings.Contains(r.stderr, c.stderr) {
				t.Fatalf("stderr %q does not contain %q", r.stderr, c.stderr)
			}
			if strings.Contains(r.stderr, "goroutine") || strings.Contains(r.stderr, "panic") {
				t.Fatalf("stderr has a stack trace:\n%s", r.stderr)
			}
		})
	}
}

func TestNoManifestIsAUsageError(t *testing.T) {
	t.Chdir(t.TempDir())
	r := airlock(t, nil, "validate")
	if r.code != 2 || !strings.Contains(r.stderr, "no sandbox.toml") || !strings.Contains(r.stderr, "airlock init") {
		t.Fatalf("got %d %q", r.code, r.stderr)
	}
}

func TestManifestFoundInParent(t *testing.T) {
	dir := project(t, "[sandbox]\nimage = \"busybox\"\n")
	sub := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	r := airlock(t, nil, "config", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("config --json is not JSON: %v\n%s", err, r.stdout)
	}
	if m["sandbox"].(map[string]any)["image"] != "busybox" {
		t.Fatalf("unexpected config: %s", r.stdout)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"bogus"}, {"config", "--bogus"}, {"version", "extra"}, {"presets", "show"}, {"presets", "show", "nope"}, {"--log-level", "loud", "version"}} {
		r := airlock(t, nil, args...)
		if r.code != 2 {
			t.Errorf("airlock %v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
		if r.stderr == "" {
			t.Errorf("airlock %v: no message", args)
		}
	}
}

func TestConfigShowsLayersAndMasksNothingFromHost(t *testing.T) {
	t.Parallel()
	dir := project(t, "presets = [\"redis\"]\n[sandbox]\nimage = \"${IMG:-busybox}\"\n[env]\nTOKEN = \"${TOKEN_FROM_HOST}\"\n")
	r := airlock(t, map[string]string{"TOKEN_FROM_HOST": "abc123"}, "--file", dir, "config", "--layers")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		`daemons.redis.command = ["redis-server"`, "# preset redis:",
		`sandbox.image = "busybox"`, "/sandbox.toml:3",
		`env.TOKEN = "abc123"`, "/sandbox.toml:5",
		`daemons.redis.max_restarts = 10`, "# default",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("config --layers lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestConfigWarnsWhenPrivileged(t *testing.T) {
	t.Parallel()
	dir := project(t, "presets = [\"docker\"]\n[sandbox]\nimage = \"docker:dind\"\n")
	r := airlock(t, nil, "--file", dir, "config")
	if r.code != 0 || !strings.Contains(r.stderr, "warning: sandbox.privileged = true") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "privileged = true") || !strings.Contains(r.stdout, "harden = false") {
		t.Fatalf("config lacks the docker preset's settings:\n%s", r.stdout)
	}
}

func TestInitWritesAValidManifestAndNeverOverwrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "sandbox.toml")
	if r := airlock(t, nil, "--file", dir, "init", "--image", "busybox:latest"); r.code != 0 {
		t.Fatalf("init: exit %d: %s", r.code, r.stderr)
	}
	if r := airlock(t, nil, "--file", file, "validate"); r.code != 0 {
		t.Fatalf("the starter manifest does not validate: %s", r.stderr)
	}
	before, _ := os.ReadFile(file)
	r := airlock(t, nil, "--file", dir, "init")
	if r.code != 1 || !strings.Contains(r.stderr, "already exists") {
		t.Fatalf("second init: exit %d, stderr %q", r.code, r.stderr)
	}
	after, _ := os.ReadFile(file)
	if !bytes.Equal(before, after) {
		t.Fatal("init changed an existing sandbox.toml")
	}
}

func TestPresetsListShowsUserShadowing(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	cfg := filepath.Join(home, "cfg")
	writeFile(t, filepath.Join(cfg, "airlock", "presets", "redis.toml"), "# my redis\n[env]\nMINE = \"1\"\n")
	writeFile(t, filepath.Join(cfg, "airlock", "presets", "team.toml"), "# team defaults\ntools = [\"git\"]\n")
	r := airlock(t, map[string]string{"XDG_CONFIG_HOME": cfg}, "presets", "ls")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"postgres", "built-in", "team", "team defaults", "my redis", "(shadows the built-in)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("presets ls lacks %q:\n%s", want, r.stdout)
		}
	}
	r = airlock(t, map[string]string{"XDG_CONFIG_HOME": cfg}, "presets", "show", "redis")
	if r.code != 0 || !strings.Contains(r.stdout, "MINE") {
		t.Fatalf("presets show redis should print the user preset: %d %q", r.code, r.stdout)
	}
}

func TestSchemaIsJSON(t *testing.T) {
	t.Parallel()
	r := airlock(t, nil, "schema")
	var v map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || v["$schema"] == nil {
		t.Fatalf("schema: exit %d, output %.200q", r.code, r.stdout)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := airlock(t, nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "airlock "+Version+" (build ") {
		t.Fatalf("version: %d %q", r.code, r.stdout)
	}
}

// TestBooleanFlagsTakeNoValueInHelp: a flag that takes no value shows none in
// --help (pflag reads a back-quoted word of the usage text as the value's name:
// `--keep airlock logs` read as if --keep took one).
func TestBooleanFlagsTakeNoValueInHelp(t *testing.T) {
	t.Parallel()
	r := airlock(t, nil, "run", "--help")
	if r.code != 0 {
		t.Fatalf("run --help: exit %d: %s", r.code, r.stderr)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "--keep" && f[1] != "leave" {
			t.Errorf("run --help shows a value for --keep: %q", line)
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); f.Value.Type() == "bool" && name != "" {
				t.Errorf("airlock %s --%s: --help shows it taking %q", c.CommandPath(), f.Name, name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand(&app{}))
}

// TestConfigLayersLongValue: a long value (a multi-line script) is not the
// width every other line of config --layers is padded to.
func TestConfigLayersLongValue(t *testing.T) {
	t.Parallel()
	script := strings.Repeat("echo preparing the database schema; ", 30)
	dir := project(t, "[sandbox]\nimage = \"busybox\"\n\n[daemons.db]\ncommand = [\"sh\", \"-c\", '''\n"+script+"\n''']\n")
	r := airlock(t, nil, "--file", dir, "config", "--layers")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var image string
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "sandbox.image = ") {
			image = line
		}
	}
	if image == "" || !strings.Contains(image, "# ") {
		t.Fatalf("no sandbox.image line with its layer:\n%s", r.stdout)
	}
	if len(image) > 120 {
		t.Errorf("sandbox.image's line is %d characters long (padded to the script's width): %q", len(image), image)
	}
}
