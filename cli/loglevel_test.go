package cli

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/secrets"
)

// TestLogLevelRefusedByEveryCommand: `--log-level bogus` is a usage error
// (exit 2) naming the flag, for every command of the tree (hidden ones
// included), before the command does anything: each command's own run is
// replaced by a stub that fails the test when reached.
func TestLogLevelRefusedByEveryCommand(t *testing.T) {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.Runnable() && len(path) > 0 && !c.DisableFlagParsing {
			paths = append(paths, path)
		}
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk(newRootCommand(&app{}), nil)
	if len(paths) < 20 {
		t.Fatalf("found only %d commands: %q", len(paths), paths)
	}
	for _, path := range paths {
		name := strings.Join(path, " ")
		refused := false
		// A command's argument check runs before the flag's: give it 0 to 3 arguments.
		for n := 0; n <= 3 && !refused; n++ {
			home := t.TempDir()
			vars := map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "config"), "XDG_DATA_HOME": filepath.Join(home, "data"), "XDG_RUNTIME_DIR": filepath.Join(home, "run")}
			var out, errb bytes.Buffer
			a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, redactor: secrets.NewRedactor(),
				getenv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
			root := newRootCommand(a)
			ran := false
			stubRuns(root, func() { ran = true })
			args := append(append(append([]string{}, path...), "--log-level", "bogus"), strings.Fields(strings.Repeat("x ", n))...)
			root.SetArgs(args)
			err := root.Execute()
			if ran {
				t.Errorf("airlock %s: the command ran with --log-level bogus", strings.Join(args, " "))
				break
			}
			var ee *exitError
			if errors.As(err, &ee) && strings.Contains(err.Error(), "--log-level") {
				refused = true
				if ee.Code != ExitUsage || !strings.Contains(err.Error(), `"bogus"`) {
					t.Errorf("airlock %s: exit %d, %v; want %d naming the value", name, ee.Code, err, ExitUsage)
				}
			}
		}
		if !refused {
			t.Errorf("airlock %s: --log-level bogus is not refused as such", name)
		}
	}

	// Through Main's exit code mapping, with the message on stderr.
	for _, args := range [][]string{{"--log-level", "bogus", "version"}, {"validate", "--log-level", "bogus"}, {"daemon", "status", "--log-level", "WARN"}, {"--log-level=", "ps"}} {
		r := airlock(t, nil, args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "airlock: invalid --log-level") {
			t.Errorf("airlock %q: exit %d, stderr %q; want 2 and the reason", args, r.code, r.stderr)
		}
	}
	for _, level := range []string{"debug", "info", "warn", "error"} {
		if r := airlock(t, nil, "--log-level", level, "version"); r.code != 0 {
			t.Errorf("--log-level %s: exit %d, stderr %q", level, r.code, r.stderr)
		}
	}
}

// TestLogLevelInConfigRefused: runtime.log_level of config.toml takes the same
// names; another is a config error naming the key (exit 2), before the
// daemon starts.
func TestLogLevelInConfigRefused(t *testing.T) {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "config", "airlock", "config.toml"), "[runtime]\nlog_level = \"bogus\"\n")
	vars := map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "config"), "XDG_DATA_HOME": filepath.Join(home, "data"), "XDG_RUNTIME_DIR": filepath.Join(home, "run")}
	r := airlock(t, vars, "daemon", "run")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "runtime.log_level") || !strings.Contains(r.stderr, `"bogus"`) {
		t.Errorf("exit %d, stderr %q; want 2 naming runtime.log_level", r.code, r.stderr)
	}
}

// stubRuns replaces the run of every command under c with f.
func stubRuns(c *cobra.Command, f func()) {
	if c.Runnable() {
		c.Run = nil
		c.RunE = func(*cobra.Command, []string) error { f(); return nil }
	}
	for _, sub := range c.Commands() {
		stubRuns(sub, f)
	}
}
