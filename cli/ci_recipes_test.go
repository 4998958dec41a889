package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The CI recipes of docs/ci.md are files in examples/ci: each parses as YAML,
// stands verbatim in the manual, and every airlock command in it parses with the
// real command tree (command names and flags), without running anything.
func TestCIRecipesParse(t *testing.T) {
	doc, err := os.ReadFile("../docs/ci.md")
	if err != nil {
		t.Fatal(err)
	}
	for file, commands := range map[string]func(any) []string{
		"github-actions.yml": githubRuns,
		"gitlab-ci.yml":      gitlabScripts,
	} {
		t.Run(file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("../examples/ci", file))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(doc, b) {
				t.Errorf("docs/ci.md does not hold examples/ci/%s verbatim", file)
			}
			var tree any
			if err := yaml.Unmarshal(b, &tree); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			n := 0
			for _, script := range commands(tree) {
				for _, line := range strings.Split(script, "\n") {
					fields := strings.Fields(line)
					if len(fields) == 0 || fields[0] != "airlock" {
						continue
					}
					n++
					checkCommandLine(t, fields[1:])
				}
			}
			if n < 2 {
				t.Errorf("%s: %d airlock commands found, want validate and run", file, n)
			}
		})
	}
}

func checkCommandLine(t *testing.T, args []string) {
	t.Helper()
	a := &app{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: func(string) (string, bool) { return "", false }}
	root := newRootCommand(a)
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		t.Errorf("airlock %s: no such command (%v)", strings.Join(args, " "), err)
		return
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("airlock %s: %v", strings.Join(args, " "), err)
		return
	}
	if cmd.Args != nil {
		if err := cmd.Args(cmd, cmd.Flags().Args()); err != nil {
			t.Errorf("airlock %s: %v", strings.Join(args, " "), err)
		}
	}
}

// githubRuns returns the run: scripts of every step of every job.
func githubRuns(tree any) []string {
	var out []string
	jobs, _ := field(tree, "jobs").(map[string]any)
	for _, job := range jobs {
		steps, _ := field(job, "steps").([]any)
		for _, s := range steps {
			if run, ok := field(s, "run").(string); ok {
				out = append(out, run)
			}
		}
	}
	return out
}

// gitlabScripts returns the script lines of every job.
func gitlabScripts(tree any) []string {
	var out []string
	top, _ := tree.(map[string]any)
	for _, job := range top {
		for _, key := range []string{"before_script", "script", "after_script"} {
			lines, _ := field(job, key).([]any)
			for _, l := range lines {
				if s, ok := l.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func field(v any, key string) any {
	m, _ := v.(map[string]any)
	return m[key]
}
