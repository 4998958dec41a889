//go:build !nocompose

package compose

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"
)

// Referenced lists the other files loading o.File reads: the files its
// include entries name (with their env_file, or the .env of the included
// project), the env files of its services, and the files services extend, followed through every file they
// lead to. Each is read with read (the manifest's layer reader, which refuses
// links, FIFOs and huge files and records what it read) before compose-go
// reads it, so that none of them escapes the layers a sandbox may not change.
// A file that does not exist is left to compose-go to report (.env files are
// optional and listed all the same: their appearance is a change).
func Referenced(o Options, read func(string) ([]byte, error)) ([]string, error) {
	env, err := environment(o)
	if err != nil {
		return nil, err
	}
	r := &refs{env: env, read: read, seen: map[string]bool{o.File: true}, check: o.CheckEnvFile}
	if err := r.walk(o.File, filepath.Dir(o.File), o.Content); err != nil {
		return nil, err
	}
	return r.out, nil
}

type refs struct {
	check func(string) error
	env   types.Mapping
	read  func(string) ([]byte, error)
	seen  map[string]bool
	out   []string
}

func (r *refs) expand(s string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	if v, err := template.Substitute(s, func(k string) (string, bool) { v, ok := r.env[k]; return v, ok }); err == nil {
		return v
	}
	return s
}

func (r *refs) abs(dir, p string) string {
	p = r.expand(p)
	if strings.HasPrefix(p, "~/") {
		return p // compose-go resolves it against the home dir; left to it
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p)
}

// envFile reads the env file p (absolute) that file (its content data) names
// as written under key, once CheckEnvFile allowed it.
func (r *refs) envFile(file string, data []byte, key []string, written, p string) error {
	if r.check != nil {
		if err := r.check(p); err != nil {
			return &EnvFileError{File: file, Line: lineOf(data, written), Path: key, Err: err}
		}
	}
	return r.file(p, "", false)
}

// lineOf is the line of data where written first appears (0: nowhere).
func lineOf(data []byte, written string) int {
	for i, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, written) {
			return i + 1
		}
	}
	return 0
}

// file reads p once; yaml files are walked for what they name in turn.
func (r *refs) file(p, workdir string, walk bool) error {
	if r.seen[p] {
		return nil
	}
	r.seen[p] = true
	r.out = append(r.out, p)
	data, err := r.read(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", p, err)
	}
	if !walk {
		return nil
	}
	return r.walk(p, workdir, data)
}

func (r *refs) walk(file, workdir string, data []byte) error {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil // compose-go reports it
	}
	for _, inc := range asList(doc["include"]) {
		var paths, envFiles []string
		projectDir := ""
		switch v := inc.(type) {
		case string:
			paths = []string{v}
		case map[string]any:
			paths = asStrings(v["path"])
			envFiles = asStrings(v["env_file"])
			projectDir, _ = v["project_directory"].(string)
		}
		if len(paths) == 0 {
			continue
		}
		first := r.abs(workdir, paths[0])
		incDir := filepath.Dir(first)
		if projectDir != "" {
			incDir = r.abs(workdir, projectDir)
		}
		for _, p := range paths {
			abs := r.abs(workdir, p)
			if err := r.file(abs, filepath.Dir(abs), true); err != nil {
				return err
			}
		}
		if len(envFiles) == 0 {
			envFiles = []string{filepath.Join(incDir, ".env")}
		}
		for _, e := range envFiles {
			if e == "/dev/null" {
				continue
			}
			if err := r.envFile(file, data, []string{"include", "env_file"}, e, r.abs(workdir, e)); err != nil {
				return err
			}
		}
	}
	services, _ := doc["services"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(services)) {
		svc, _ := services[name].(map[string]any)
		key := []string{"services", name, "env_file"}
		for _, e := range asList(svc["env_file"]) {
			if m, ok := e.(map[string]any); ok {
				e = m["path"]
			}
			if p, ok := e.(string); ok {
				if err := r.envFile(file, data, key, p, r.abs(filepath.Dir(file), p)); err != nil {
					return err
				}
			}
		}
		if p, ok := svc["env_file"].(string); ok {
			if err := r.envFile(file, data, key, p, r.abs(filepath.Dir(file), p)); err != nil {
				return err
			}
		}
		ext, _ := svc["extends"].(map[string]any)
		f, _ := ext["file"].(string)
		if f == "" {
			continue
		}
		abs := r.abs(filepath.Dir(file), f)
		if err := r.file(abs, filepath.Dir(abs), true); err != nil {
			return err
		}
	}
	return nil
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func asStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
