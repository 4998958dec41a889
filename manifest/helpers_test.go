package manifest_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/presets"
)

// project is a project directory in t.TempDir(), with a user presets folder beside
// it, a host environment and a vault; files are written relative to its root.
type project struct {
	t       *testing.T
	root    string // holds proj/ (the project dir) and user/ (user presets)
	dir     string
	userDir string
	env     map[string]string
	vault   *fakeVault
	builtin fs.FS
}

func newProject(t *testing.T, files map[string]string) *project {
	t.Helper()
	root := t.TempDir()
	p := &project{
		t:       t,
		root:    root,
		dir:     filepath.Join(root, "proj"),
		userDir: filepath.Join(root, "user"),
		env:     map[string]string{},
		vault:   &fakeVault{values: map[string]string{}},
		builtin: presets.FS,
	}
	for _, d := range []string{p.dir, p.userDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.write(files)
	return p
}

// write creates files; names are relative to the project dir ("../user/x.toml" for
// a user preset).
func (p *project) write(files map[string]string) {
	p.t.Helper()
	for name, content := range files {
		f := filepath.Join(p.dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
}

func (p *project) loader() *manifest.Loader {
	return &manifest.Loader{
		UserPresetsDir: p.userDir,
		Builtin:        p.builtin,
		Getenv: func(name string) (string, bool) {
			v, ok := p.env[name]
			return v, ok
		},
		Vault:   p.vault,
		Environ: func() []string { return nil },
		// Errors and `config --layers` name files relative to the project dir, as
		// the CLI shows them.
		Display: func(path string) string {
			if rel, err := filepath.Rel(p.dir, path); err == nil {
				return filepath.ToSlash(rel)
			}
			return path
		},
	}
}

func (p *project) load() (*manifest.Resolved, error) {
	return p.loader().Load(filepath.Join(p.dir, manifest.FileName))
}

func (p *project) mustLoad() *manifest.Resolved {
	p.t.Helper()
	r, err := p.load()
	if err != nil {
		p.t.Fatalf("Load: unexpected error:\n%v", err)
	}
	return r
}

// loadErr loads and returns the error text; the load must fail with a config error.
func (p *project) loadErr() string {
	p.t.Helper()
	r, err := p.load()
	if err == nil {
		j, _ := r.JSON()
		p.t.Fatalf("Load succeeded, want an error; resolved:\n%s", j)
	}
	if !manifest.IsConfigError(err) {
		p.t.Fatalf("Load error is not a config error (%T): %v", err, err)
	}
	return err.Error()
}

// load is the short form for a project of just these files.
func load(t *testing.T, files map[string]string) *manifest.Resolved {
	t.Helper()
	return newProject(t, files).mustLoad()
}

func loadErr(t *testing.T, files map[string]string) string {
	t.Helper()
	return newProject(t, files).loadErr()
}

// wantLines checks that every wanted line is one line of the error text.
func wantLines(t *testing.T, got string, want ...string) {
	t.Helper()
	lines := strings.Split(got, "\n")
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("error text lacks the line\n\t%s\ngot:\n\t%s", w, strings.Join(lines, "\n\t"))
		}
	}
}

// setting returns the `config --layers` entry of key.
func setting(t *testing.T, r *manifest.Resolved, key string) manifest.Setting {
	t.Helper()
	for _, s := range r.Settings() {
		if s.Key == key {
			return s
		}
	}
	t.Fatalf("Settings() has no key %s", key)
	return manifest.Setting{}
}

func hasSetting(r *manifest.Resolved, key string) bool {
	for _, s := range r.Settings() {
		if s.Key == key {
			return true
		}
	}
	return false
}

// fakeVault is a manifest.Lookup that counts what it is asked.
type fakeVault struct {
	mu     sync.Mutex
	values map[string]string
	err    error
	asked  []string
}

func (v *fakeVault) Lookup(name string) (string, bool, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.asked = append(v.asked, name)
	if v.err != nil {
		return "", false, v.err
	}
	val, ok := v.values[name]
	return val, ok, nil
}

func (v *fakeVault) calls() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.asked...)
}

var errVaultLocked = errors.New("vault is locked")

// img is the smallest valid [sandbox] table, for fixtures that test something else.
const img = "[sandbox]\nimage = \"debian:bookworm\"\n"

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}
