package control

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/BurntSushi/toml"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/presets"
)

// ManifestText is a manifest given to the API as text (a sandbox.toml) or as
// a document (the same structure as JSON) instead of resolved: the daemon
// resolves it, for clients that cannot (the Python SDK, curl).
type ManifestText struct {
	TOML string
	Doc  json.RawMessage
	// ProjectDir is the project directory on the daemon's host ("": an empty
	// project of the sandbox's own, copied in).
	ProjectDir string
	// Vars are the values of the manifest's ${NAME}s; a name not here is unset
	// (the daemon's own environment is never read).
	Vars map[string]string
}

// resolveText resolves a manifest given as text the way `airlock validate`
// does a sandbox.toml: built-in presets by name, path presets relative to the
// project dir, ${NAME} from Vars (held like any substituted value: in memory
// only), no vault (the caller resolves vault values itself). It returns the
// wire form and the substituted values.
func (s *Service) resolveText(mt *ManifestText) (*manifest.Wire, map[string]string, error) {
	data := []byte(mt.TOML)
	switch {
	case mt.TOML == "" && mt.Doc == nil:
		return nil, nil, errorf(ErrInvalidRequest, "project_dir and vars go with a manifest_toml or manifest_doc")
	case mt.TOML != "" && mt.Doc != nil:
		return nil, nil, errorf(ErrInvalidRequest, "give manifest_toml or manifest_doc, not both")
	case mt.Doc != nil:
		var err error
		if data, err = docToTOML(mt.Doc); err != nil {
			return nil, nil, errorf(ErrInvalidRequest, "cannot read manifest_doc: %v", err)
		}
	}
	dir, copied := mt.ProjectDir, false
	if dir == "" {
		dir, copied = s.emptyProject(), true
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("cannot make the empty project %s: %w", dir, err)
		}
	} else if !filepath.IsAbs(dir) {
		return nil, nil, errorf(ErrInvalidRequest, "project_dir %q is not an absolute path", dir)
	} else if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, nil, errorf(ErrConfig, "project_dir %s is not a directory on the daemon's host", dir)
	}
	l := &manifest.Loader{
		Builtin:   presets.FS,
		SecretEnv: true, // the caller's values: a key, a password
		Getenv: func(name string) (string, bool) {
			v, ok := mt.Vars[name]
			return v, ok
		},
	}
	r, err := l.LoadBytes(manifestName, dir, data)
	if err != nil {
		return nil, nil, errorf(ErrConfig, "%v", err)
	}
	if copied {
		// Nothing of the shared empty directory is bound into the sandbox:
		// each gets a copy of its own.
		r.Sandbox.Project = "copy"
	}
	r.File = filepath.Join(dir, manifestName)
	w, values, err := r.ToWire()
	if err != nil {
		return nil, nil, err
	}
	return &w, values, nil
}

// manifestName names a manifest given as text in errors and records.
const manifestName = "sandbox.toml"

// emptyProject is the project directory of a sandbox created from a manifest
// text without one: empty, copied into each sandbox.
func (s *Service) emptyProject() string {
	if s.cfg.EmptyProject != "" {
		return s.cfg.EmptyProject
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("airlock-%d-empty-project", os.Getuid()))
}

// docToTOML writes a manifest document (JSON) as TOML, integers kept integers.
func docToTOML(doc json.RawMessage) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(numbers(v)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// numbers replaces each json.Number in v by an int64 when it is one, else a float64.
func numbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	}
	return v
}
