package manifest

import "slices"

// origin records which layer set a key, so errors and `config --layers` can name it.
type origin struct {
	layer *layer // nil for a default
	path  []string
}

// Label is the layer's name, or "default".
func (o origin) Label() string {
	if o.layer == nil {
		return "default"
	}
	return o.layer.name
}

// unionKeys are the top-level arrays that accumulate across layers instead of
// being replaced (design.md §4).
var unionKeys = map[string]bool{"presets": true, "tools": true}

// readyKinds are the keys of a ready table of which only one may be set: a layer
// that sets one replaces any other a lower layer set.
var readyKinds = []string{"tcp", "http", "cmd", "log"}

// readyExchange are the keys that go with a tcp check: a layer that sets a
// check replaces them too (a lower layer's expect is not the new check's).
var readyExchange = []string{"send", "expect"}

// merge lays src over dst: tables merge key by key, a scalar or an array in src
// replaces dst's, except the union keys, whose items are appended without
// duplicates. In a table of variables (isEnvTable) a false removes dst's variable;
// removing one that no lower layer set is an error.
func merge(dst, src map[string]any, prefix []string, l *layer, origins map[string]origin) Errors {
	var errs Errors
	if isReadyTable(prefix) && hasAnyKey(src, readyKinds) {
		for _, k := range append(readyKinds, readyExchange...) {
			delete(dst, k)
		}
		// The check is now this layer's: errors about it (two kinds, none) name it.
		origins[KeyPath(prefix...)] = origin{layer: l, path: prefix}
	}
	for k, sv := range src {
		path := append(append([]string{}, prefix...), k)
		if sm, ok := sv.(map[string]any); ok {
			dm, ok := dst[k].(map[string]any)
			if !ok {
				dm = map[string]any{}
				dst[k] = dm
			}
			if _, seen := origins[KeyPath(path...)]; !seen {
				origins[KeyPath(path...)] = origin{layer: l, path: path}
			}
			errs = append(errs, merge(dm, sm, path, l, origins)...)
			continue
		}
		if b, ok := sv.(bool); ok && !b && isEnvTable(prefix) {
			if _, set := dst[k]; !set {
				errs = append(errs, &Error{File: l.name, Line: l.lines.line(path), Key: KeyPath(path...),
					Msg: "false removes a variable a lower layer set, but no lower layer sets " + KeyPath(path...)})
			}
			delete(dst, k)
			delete(origins, KeyPath(path...))
			continue
		}
		if len(prefix) == 0 && unionKeys[k] {
			dst[k] = union(dst[k], sv)
		} else {
			dst[k] = sv
		}
		origins[KeyPath(path...)] = origin{layer: l, path: path}
	}
	return errs
}

func isReadyTable(path []string) bool {
	return len(path) == 3 && path[0] == "daemons" && path[2] == "ready"
}

func hasAnyKey(m map[string]any, keys []string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

func union(a, b any) any {
	as, _ := a.([]any)
	bs, _ := b.([]any)
	out := append([]any{}, as...)
	for _, v := range bs {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
