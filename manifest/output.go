package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Mask replaces every value that came from the vault in output.
const Mask = "********"

// Masked returns a copy of the manifest in which every value substituted from the
// vault is replaced by Mask. Values from the host environment are shown: the user
// already holds them (design.md §5).
func (r *Resolved) Masked() Manifest {
	m := r.Manifest
	walkSubstituted(&m, func(path []string, v string) string {
		if r.Sources[KeyPath(path...)] == Vault {
			return Mask
		}
		return v
	})
	return m
}

// PlanView is the manifest as a plan hash sees it: every substituted environment
// value (from the host or the vault) is masked, as are vault values anywhere. Such
// values are delivered to the sandbox at each start and are never part of what
// Docker keeps, so they need not recreate it; and a hash of a short value can be
// reversed by brute force.
func (r *Resolved) PlanView() Manifest {
	m := r.Manifest
	walkSubstituted(&m, func(path []string, v string) string {
		src := r.Sources[KeyPath(path...)]
		inEnv := len(path) > 0 && path[0] == "env" || len(path) > 2 && path[len(path)-2] == "env"
		if src == Vault || (src != Literal && inEnv) {
			return Mask
		}
		return v
	})
	return m
}

// TOML renders the masked manifest as TOML.
func (r *Resolved) TOML() ([]byte, error) {
	var b bytes.Buffer
	enc := toml.NewEncoder(&b)
	enc.Indent = ""
	if err := enc.Encode(r.Masked()); err != nil {
		return nil, fmt.Errorf("cannot encode the manifest as TOML: %w", err)
	}
	return b.Bytes(), nil
}

// JSON renders the masked manifest as indented JSON with the TOML key names.
func (r *Resolved) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r.Masked(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("cannot encode the manifest as JSON: %w", err)
	}
	return append(b, '\n'), nil
}

// Setting is one value of the resolved manifest and the layer that set it.
type Setting struct {
	Key   string `json:"key"`
	Value string `json:"value"` // as a TOML value, masked when secret
	Layer string `json:"layer"` // "sandbox.toml:12", "preset redis:3" or "default"
}

// Settings lists every value of the resolved manifest with its layer, sorted by key.
func (r *Resolved) Settings() []Setting {
	b, _ := json.Marshal(r.Masked())
	var tree map[string]any
	_ = json.Unmarshal(b, &tree)
	var out []Setting
	var walk func(path []string, v any)
	walk = func(path []string, v any) {
		if m, ok := v.(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				walk(append(append([]string{}, path...), k), m[k])
			}
			return
		}
		s := Setting{Key: KeyPath(path...), Value: tomlValue(v), Layer: "default"}
		if o, ok := r.origins[s.Key]; ok && o.layer != nil {
			s.Layer = o.layer.name
			if line := o.layer.lines.line(path); line > 0 {
				s.Layer += ":" + strconv.Itoa(line)
			}
		}
		if s.Key == "tools" {
			for _, alias := range slices.Sorted(maps.Keys(r.aliases)) {
				s.Layer += fmt.Sprintf(" (%s: alias of %s)", alias, r.aliases[alias])
			}
		}
		out = append(out, s)
	}
	walk(nil, tree)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// tomlValue writes a JSON-decoded value as a TOML value.
func tomlValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = tomlValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case nil:
		return `""`
	}
	return fmt.Sprint(v)
}

// Redacted returns a copy of the manifest in which every substituted value (from
// the host environment or the vault) is replaced by Mask, and those values by key
// path: what a record may keep, and what must travel privately. A value that
// holds a secret variable's value (the vault's, or an API caller's) among other
// text brings that variable's value too, by PieceKey: whoever masks the values
// masks each piece on its own as well.
func (r *Resolved) Redacted() (Manifest, map[string]string) {
	values := map[string]string{}
	m := r.Manifest
	hide := func(path []string, v string) string {
		key := KeyPath(path...)
		if r.Sources[key] == Literal {
			return v
		}
		values[key] = v
		for _, p := range r.pieces[key] {
			values[PieceKey(key, p.name)] = p.val
		}
		return Mask
	}
	walkSubstituted(&m, hide)
	return m, values
}

// PieceKey is the key under which Redacted gives the value of variable name
// inside the substituted value at key path: "sandbox.image.${API_KEY}" for
// image = "registry/${API_KEY}". Such a value is masked on its own too, so an
// error that quotes the field in parts (a registry's URL) does not show it.
// No key path of a manifest has a "$".
func PieceKey(keyPath, name string) string { return keyPath + ".${" + name + "}" }

// PieceField is the key path of the field a PieceKey names a piece of; ok is
// false for a key that is not a PieceKey.
func PieceField(key string) (field string, ok bool) {
	i := strings.LastIndex(key, ".${")
	if i < 0 || !strings.HasSuffix(key, "}") {
		return "", false
	}
	return key[:i], true
}

// Restore builds a Resolved from a redacted manifest and the values Redacted
// took out of it: the second half of the wire round trip, called by FromWire.
// Its typed values (Parsed) are read from m.
func Restore(m Manifest, file, projectDir string, sources map[string]Source, values map[string]string) *Resolved {
	fill := func(path []string, v string) string {
		if val, ok := values[KeyPath(path...)]; ok {
			return val
		}
		return v
	}
	walkSubstituted(&m, fill)
	return &Resolved{Manifest: m, File: file, ProjectDir: projectDir, Sources: sources, Parsed: parseValues(&m), origins: map[string]origin{}}
}

// walkSubstituted calls f on every value substitution applies to, with its key
// path, replacing it with f's result. Maps are copied, not changed in place.
func walkSubstituted(m *Manifest, f func(path []string, v string) string) {
	env := func(prefix []string, vars map[string]string) map[string]string {
		if vars == nil {
			return nil
		}
		out := make(map[string]string, len(vars))
		for k, v := range vars {
			out[k] = f(append(append([]string{}, prefix...), k), v)
		}
		return out
	}
	m.Sandbox.Image = f([]string{"sandbox", "image"}, m.Sandbox.Image)
	m.Env = env([]string{"env"}, m.Env)
	m.Mounts = editEach(m.Mounts, func(n string, e *Mount) { e.Source = f([]string{"mounts", n, "source"}, e.Source) })
	m.Copies = editEach(m.Copies, func(n string, e *Copy) { e.Source = f([]string{"copies", n, "source"}, e.Source) })
	m.Daemons = editEach(m.Daemons, func(n string, e *Daemon) { e.Env = env([]string{"daemons", n, "env"}, e.Env) })
	m.Services = editEach(m.Services, func(n string, e *Service) { e.Env = env([]string{"services", n, "env"}, e.Env) })
}

// editEach returns a copy of entries with edit applied to each entry.
func editEach[E any](entries map[string]E, edit func(name string, e *E)) map[string]E {
	entries = maps.Clone(entries)
	for n, e := range entries {
		edit(n, &e)
		entries[n] = e
	}
	return entries
}
