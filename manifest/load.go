package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// FileName and LocalFileName are the manifest files of a project directory.
const (
	FileName      = "sandbox.toml"
	LocalFileName = "sandbox.local.toml"
)

// ErrNoManifest is returned by FindFile when no sandbox.toml is above the directory.
var ErrNoManifest = errors.New("no " + FileName + " in this directory or any parent")

// FindFile returns the sandbox.toml of the nearest ancestor of dir (dir included) that has one.
func FindFile(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("cannot resolve %s: %w", dir, err)
	}
	for {
		p := filepath.Join(dir, FileName)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoManifest
		}
		dir = parent
	}
}

// Loader resolves a manifest: its presets, its local overrides, defaults,
// substitution and validation.
type Loader struct {
	// UserPresetsDir holds user presets as <name>.toml; "" means none.
	UserPresetsDir string
	// Builtin holds the built-in presets as <name>.toml at its root.
	Builtin fs.FS
	// Getenv looks a host environment variable up; nil means os.LookupEnv.
	Getenv func(string) (string, bool)
	// Vault is asked for the names the host environment lacks; nil means no vault.
	Vault Lookup
	// SecretEnv says every value Getenv gives is a secret (an API caller's
	// values): one that is part of a longer value is masked on its own too,
	// wherever it is, as a vault's value is (Resolved.Redacted).
	SecretEnv bool
	// ReadFile reads layer files; nil means ReadLayer.
	ReadFile func(string) ([]byte, error)
	// Display shortens file names in errors and origins; nil means as given.
	Display func(path string) string
	// Environ is the host environment a compose file is interpolated with
	// (K=V); nil means os.Environ.
	Environ func() []string
	// ProjectDir is the project dir when it is not the manifest's folder
	// (--project); env files are read from below it, the manifest's folder
	// or UserPresetsDir only.
	ProjectDir string
	// EnvFilesOutside are the env files (absolute paths) a service may read
	// from outside those folders: the user's config.toml, [services]
	// env_files_outside.
	EnvFilesOutside []string
}

// LayerInfo names one layer of a resolved manifest, lowest first.
type LayerInfo struct {
	Name    string `json:"name"`
	Builtin bool   `json:"builtin,omitempty"`
}

// Resolved is a manifest after layering, defaults, substitution and validation.
type Resolved struct {
	Manifest
	// File is the sandbox.toml it came from; ProjectDir is its directory.
	File       string
	ProjectDir string
	// Layers lists the files that took part, lowest first.
	Layers []LayerInfo
	// Sources tells, for every substituted value, where its ${VAR}s came from.
	// Keys are key paths (env.TOKEN, daemons.redis.env.PASS, sandbox.image, …).
	Sources map[string]Source
	// Parsed are the manifest's strings that have a type of their own
	// (ports, sizes, extra hosts, services' volumes and tmpfs) read: what the
	// backends use. They are derived from Manifest and never travel.
	Parsed  Parsed `json:"-"`
	origins map[string]origin
	// aliases lists the tool aliases the layers used, each with its canonical name.
	aliases map[string]string
	// pieces are, by key path, the secret values of the variables inside a
	// substituted value that is not just one of them (Redacted).
	pieces map[string][]piece
}

func (l *Loader) readFile(p string) ([]byte, error) {
	if l.ReadFile != nil {
		return l.ReadFile(p)
	}
	return ReadLayer(p)
}

func (l *Loader) display(p string) string {
	if l.Display != nil {
		return l.Display(p)
	}
	return p
}

// Load resolves the sandbox.toml at file together with its presets and the
// sandbox.local.toml beside it. Every manifest problem is returned as *Error or Errors.
func (l *Loader) Load(file string) (*Resolved, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve %s: %w", file, err)
	}
	stack, err := l.stack(abs)
	if err != nil {
		return nil, err
	}
	r, err := resolve(stack, l.substituter(), l.readFile, l.envFileCheck(filepath.Dir(abs)))
	if err != nil {
		return nil, err
	}
	r.File = abs
	r.ProjectDir = filepath.Dir(abs)
	r.absWorkdir()
	return r, nil
}

// LoadBytes resolves a single sandbox.toml given as data, without a local file; its
// path presets are read relative to dir. It serves tests and fuzzing.
func (l *Loader) LoadBytes(name, dir string, data []byte) (*Resolved, error) {
	root, err := decodeLayer(name, data)
	if err != nil {
		return nil, err
	}
	root.dir = dir
	b := &stackBuilder{loader: l, applied: map[string]bool{}}
	if err := b.addPresets(root, []string{name}, []string{"file:" + filepath.Join(dir, name)}); err != nil {
		return nil, err
	}
	layers := append(b.layers, root)
	cl, err := l.composeLayer(layers, dir)
	if err != nil {
		return nil, err
	}
	if cl != nil {
		layers = append([]*layer{cl}, layers...)
	}
	r, err := resolve(layers, l.substituter(), l.readFile, l.envFileCheck(dir))
	if err != nil {
		return nil, err
	}
	r.ProjectDir = dir
	r.absWorkdir()
	return r, nil
}

// absWorkdir makes a relative sandbox.workdir the folder of that name in the
// project dir (which is at its own host path in the sandbox, bound or copied),
// as a monorepo's module in tests/ wants.
func (r *Resolved) absWorkdir() {
	if w := r.Sandbox.Workdir; w != "" && !path.IsAbs(w) && r.ProjectDir != "" {
		r.Sandbox.Workdir = path.Join(filepath.ToSlash(r.ProjectDir), w)
	}
}

// envFileCheck returns the check of an env file a service names: nil when it
// is below the project dir (l.ProjectDir, else manifestDir), manifestDir or
// the user's presets folder, or when EnvFilesOutside names it (links
// resolved either way); else an error that says how to allow it.
func (l *Loader) envFileCheck(manifestDir string) func(p string) error {
	real := func(p string) []string {
		out := []string{filepath.Clean(p)}
		if r, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			if rp := filepath.Join(r, filepath.Base(p)); rp != out[0] {
				out = append(out, rp)
			}
		}
		return out
	}
	var roots []string
	for _, d := range []string{l.ProjectDir, manifestDir, l.UserPresetsDir} {
		if d == "" {
			continue
		}
		roots = append(roots, filepath.Clean(d))
		if r, err := filepath.EvalSymlinks(d); err == nil {
			roots = append(roots, r)
		}
	}
	project := l.ProjectDir
	if project == "" {
		project = manifestDir
	}
	return func(p string) error {
		forms := real(p)
		for _, f := range forms {
			for _, root := range roots {
				if rel, err := filepath.Rel(root, f); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
					return nil
				}
			}
			for _, ok := range l.EnvFilesOutside {
				if slices.Contains(real(ok), f) {
					return nil
				}
			}
		}
		return fmt.Errorf("%s is outside the project (%s): an env file there is not read unless the user's config.toml names it in [services] env_files_outside", p, project)
	}
}

func (l *Loader) substituter() *substituter {
	s := &substituter{getenv: l.Getenv, vault: l.Vault, secretEnv: l.SecretEnv}
	if s.getenv == nil {
		s.getenv = os.LookupEnv
	}
	return s
}

// stack returns the layers of file, lowest first.
func (l *Loader) stack(file string) ([]*layer, error) {
	data, err := l.readFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", file, err)
	}
	root, err := decodeLayer(l.display(file), data)
	if err != nil {
		return nil, err
	}
	root.dir = filepath.Dir(file)
	var local *layer
	localPath := filepath.Join(filepath.Dir(file), LocalFileName)
	if data, err := l.readFile(localPath); err == nil {
		if local, err = decodeLayer(l.display(localPath), data); err != nil {
			return nil, err
		}
		local.dir = root.dir
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cannot read %s: %w", localPath, err)
	}
	b := &stackBuilder{loader: l, applied: map[string]bool{}}
	rootID := "file:" + file
	if err := b.addPresets(root, []string{root.name}, []string{rootID}); err != nil {
		return nil, err
	}
	layers := append(b.layers, root)
	if local != nil {
		if err := b.addPresets(local, []string{root.name, local.name}, []string{rootID, "file:" + localPath}); err != nil {
			return nil, err
		}
		layers = append(b.layers, root, local)
	}
	cl, err := l.composeLayer(layers, root.dir)
	if err != nil {
		return nil, err
	}
	if cl != nil {
		layers = append([]*layer{cl}, layers...)
	}
	return layers, nil
}

// stackBuilder orders presets depth first: a preset's own presets come before it,
// and each preset is applied once however often it is named.
type stackBuilder struct {
	loader  *Loader
	applied map[string]bool
	layers  []*layer
}

func (b *stackBuilder) addPresets(from *layer, chain, chainIDs []string) error {
	for _, ref := range from.presets {
		id, name, data, dir, builtin, err := b.loader.findPreset(ref, from)
		if err != nil {
			return &Error{File: from.name, Line: from.lines.line([]string{"presets"}), Key: "presets", Msg: err.Error()}
		}
		for i, seen := range chainIDs {
			if seen == id {
				cycle := append(append([]string{}, chain[i:]...), ref)
				if i == 0 {
					cycle[0] = filepath.Base(chain[0])
				}
				return &Error{File: from.name, Line: from.lines.line([]string{"presets"}), Key: "presets", Msg: "preset cycle: " + strings.Join(cycle, " -> ")}
			}
		}
		if b.applied[id] {
			continue
		}
		pl, err := decodeLayer(name, data)
		if err != nil {
			return err
		}
		pl.dir, pl.builtin = dir, builtin
		if err := b.addPresets(pl, append(append([]string{}, chain...), ref), append(append([]string{}, chainIDs...), id)); err != nil {
			return err
		}
		b.applied[id] = true
		b.layers = append(b.layers, pl)
	}
	return nil
}

// IsPresetPath reports whether a preset reference is a path rather than a name.
func IsPresetPath(ref string) bool {
	return strings.Contains(ref, "/") || strings.HasSuffix(ref, ".toml")
}

// findPreset resolves a reference: a path (relative to the naming layer), else a
// user preset, else a built-in.
func (l *Loader) findPreset(ref string, from *layer) (id, name string, data []byte, dir string, builtin bool, err error) {
	if ref == "" {
		return "", "", nil, "", false, errors.New("empty preset name")
	}
	if IsPresetPath(ref) {
		if from.builtin {
			p := path.Clean(path.Join(from.dir, ref))
			data, err := fs.ReadFile(l.Builtin, p)
			if err != nil {
				return "", "", nil, "", false, fmt.Errorf("unknown preset %q: %w", ref, err)
			}
			return "builtin:" + p, "builtin:" + p, data, path.Dir(p), true, nil
		}
		p := ref
		if strings.HasPrefix(p, "~/") {
			if home, err := os.UserHomeDir(); err == nil {
				p = filepath.Join(home, p[2:])
			}
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(from.dir, p)
		}
		data, err := l.readFile(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", "", nil, "", false, fmt.Errorf("unknown preset %q: %s does not exist", ref, p)
			}
			return "", "", nil, "", false, fmt.Errorf("cannot read preset %q: %w", ref, err)
		}
		return "file:" + p, l.display(p), data, filepath.Dir(p), false, nil
	}
	if !validPresetName(ref) {
		return "", "", nil, "", false, fmt.Errorf("invalid preset name %q (use letters, digits, - and _, or a path)", ref)
	}
	if l.UserPresetsDir != "" {
		p := filepath.Join(l.UserPresetsDir, ref+".toml")
		data, err := l.readFile(p)
		if err == nil {
			return "file:" + p, l.display(p), data, filepath.Dir(p), false, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", "", nil, "", false, fmt.Errorf("cannot read user preset %q: %w", ref, err)
		}
	}
	if l.Builtin != nil {
		if data, err := fs.ReadFile(l.Builtin, ref+".toml"); err == nil {
			return "builtin:" + ref + ".toml", "preset " + ref, data, ".", true, nil
		}
	}
	names := BuiltinNames(l.Builtin)
	return "", "", nil, "", false, fmt.Errorf("unknown preset %q (not a user preset in %s, not a built-in: %s)", ref, orNone(l.UserPresetsDir), strings.Join(names, ", "))
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func validPresetName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isBareKeyByte(s[i]) {
			return false
		}
	}
	return s != ""
}

// BuiltinNames lists the built-in presets in fsys, sorted.
func BuiltinNames(fsys fs.FS) []string {
	if fsys == nil {
		return nil
	}
	entries, _ := fs.ReadDir(fsys, ".")
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".toml"); ok && !e.IsDir() {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}
