package manifest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// resolve merges the stack, drops disabled entries, applies defaults, validates,
// then substitutes. read reads the env files services name (the loader's
// ReadFile, which records what a sandbox may not change).
// check refuses an env file outside the project (Loader.envFileCheck).
func resolve(stack []*layer, sub *substituter, read func(string) ([]byte, error), check func(string) error) (*Resolved, error) {
	data := map[string]any{}
	origins := map[string]origin{}
	var errs Errors
	for _, l := range stack {
		errs = append(errs, merge(data, l.raw, nil, l, origins)...)
	}
	errs = append(errs, dropDisabled(data, origins)...)
	applyDefaults(data, origins)
	var m Manifest
	if err := fromTables(data, &m); err != nil {
		return nil, err
	}
	errs = append(errs, validate(&m, origins)...)
	if err := errs.orNil(); err != nil {
		return nil, err
	}
	written := rawImages(&m)
	sources, vaultNames, pieces, errs := substitute(&m, sub, origins)
	if err := errs.orNil(); err != nil {
		return nil, err
	}
	if err := checkSubstituted(&m, sources, origins, vaultNames).orNil(); err != nil {
		return nil, err
	}
	// After substitution: an env file's values are taken literally.
	if err := readEnvFiles(&m, origins, read, check).orNil(); err != nil {
		return nil, err
	}
	if m.Sandbox.Image == "" && m.Sandbox.Build == nil {
		return nil, locate(origins, []string{"sandbox", "image"}, "is empty after substitution")
	}
	if err := checkImages(&m, written, origins, sub.getenv).orNil(); err != nil {
		return nil, err
	}
	r := &Resolved{Manifest: m, Sources: sources, Parsed: parseValues(&m), origins: origins, aliases: canonicalTools(&m.Tools),
		pieces: pieces}
	for _, l := range stack {
		r.Layers = append(r.Layers, LayerInfo{Name: l.name, Builtin: l.builtin})
	}
	return r, nil
}

// fromTables decodes merged tables into the typed model. The layers were decoded
// strictly one by one, so the types already match.
func fromTables(data map[string]any, m *Manifest) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("cannot encode the merged manifest: %w", err)
	}
	if err := json.Unmarshal(b, m); err != nil {
		return fmt.Errorf("cannot decode the merged manifest: %w", err)
	}
	return nil
}

// locate builds an *Error for path, naming the layer and line that set it (or
// its nearest parent that a layer set).
func locate(origins map[string]origin, path []string, msg string) *Error {
	e := &Error{Key: KeyPath(path...), Msg: msg}
	for n := len(path); n > 0; n-- {
		o, ok := origins[KeyPath(path[:n]...)]
		if !ok || o.layer == nil {
			continue
		}
		e.File = o.layer.name
		e.Line = o.layer.lines.line(path)
		break
	}
	return e
}

// substitute expands ${VAR} in the places design.md §5 lists and records where each
// substituted value came from, which vault variables each key used, and the
// variables' values in a value that is not one of them whole. In [env],
// ${daemons.<name>.env.<VAR>} and ${services.<name>.env.<VAR>} name the value
// (after substitution) of a daemon's or a service's variable.
func substitute(m *Manifest, sub *substituter, origins map[string]origin) (map[string]Source, map[string][]string, map[string][]piece, Errors) {
	sources := map[string]Source{}
	vaultNames := map[string][]string{}
	pieces := map[string][]piece{}
	var errs Errors
	do := func(path []string, v *string) {
		sub.fromVault, sub.used = nil, nil
		out, src, err := sub.expand(*v)
		if len(sub.fromVault) > 0 {
			vaultNames[KeyPath(path...)] = sub.fromVault
		}
		if err != nil {
			errs = append(errs, locate(origins, path, err.Error()))
			return
		}
		*v = out
		kp := KeyPath(path...)
		if src != Literal {
			sources[kp] = src
		}
		for _, p := range sub.used {
			// The vault's values and an API caller's (Loader.SecretEnv) are
			// secrets, in part too; the host's are the user's own (`airlock
			// config` shows them), masked only as whole values.
			secret := p.src == Vault || sub.secretEnv
			if secret && p.val != "" && p.val != out && !slices.Contains(pieces[kp], p) {
				pieces[kp] = append(pieces[kp], p)
			}
		}
	}
	refs := map[string]refValue{}
	env := func(prefix []string, vars map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(vars)) {
			v := vars[k]
			path := append(append([]string{}, prefix...), k)
			do(path, &v)
			vars[k] = v
			if prefix[0] != "env" {
				kp := KeyPath(path...)
				refs[kp] = refValue{val: v, src: sources[kp], vault: vaultNames[kp], pieces: pieces[kp]}
			}
		}
	}
	do([]string{"sandbox", "image"}, &m.Sandbox.Image)
	// The daemons' and services' variables first: [env] may name them.
	for _, name := range slices.Sorted(maps.Keys(m.Daemons)) {
		env([]string{"daemons", name, "env"}, m.Daemons[name].Env)
	}
	for _, name := range slices.Sorted(maps.Keys(m.Services)) {
		env([]string{"services", name, "env"}, m.Services[name].Env)
	}
	sub.refs = refs
	env([]string{"env"}, m.Env)
	sub.refs = nil
	for _, name := range slices.Sorted(maps.Keys(m.Mounts)) {
		e := m.Mounts[name]
		do([]string{"mounts", name, "source"}, &e.Source)
		m.Mounts[name] = e
	}
	for _, name := range slices.Sorted(maps.Keys(m.Copies)) {
		e := m.Copies[name]
		do([]string{"copies", name, "source"}, &e.Source)
		m.Copies[name] = e
	}
	return sources, vaultNames, pieces, errs
}

// canonicalTools replaces tool aliases by their canonical names, keeping the first
// place of each tool, and returns the aliases it replaced.
func canonicalTools(tools *[]string) map[string]string {
	aliases := map[string]string{}
	out := make([]string, 0, len(*tools))
	for _, t := range *tools {
		c, _ := CanonicalTool(t)
		if c != t {
			aliases[t] = c
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	*tools = out
	return aliases
}
