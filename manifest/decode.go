package manifest

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// layer is one decoded file of the stack: a preset, sandbox.toml or sandbox.local.toml.
type layer struct {
	name    string         // how errors and `config --layers` name it
	dir     string         // the directory relative paths in it start from
	builtin bool           // a preset embedded in the binary
	raw     map[string]any // the file's tables and values, as decoded
	lines   keyLines
	presets []string
}

var typeErrRE = regexp.MustCompile(`^toml: (?:line (\d+) )?\(last key "((?:[^"\\]|\\.)*)"\): (.*)$`)
var badTypeRE = regexp.MustCompile(`incompatible types: TOML value has type ([\w.\[\]]+); destination has type ([\w.\[\]]+)`)
var mismatchRE = regexp.MustCompile(`^type mismatch for [\w.\[\]*]+: expected (\w+) but found ([\w.\[\]]+)$`)

// decodeLayer decodes one file strictly: bad TOML, wrong types and unknown keys are
// errors naming the file, the line and the key path.
func decodeLayer(name string, data []byte) (*layer, error) {
	src := string(data)
	l := &layer{name: name, lines: scanKeyLines(src)}
	if _, err := toml.Decode(src, &l.raw); err != nil {
		return nil, l.tomlError(err, src)
	}
	var m Manifest
	md, err := toml.Decode(src, &m)
	if err != nil {
		return nil, l.tomlError(err, src)
	}
	errs, reported := l.schemaErrors(l.raw, reflect.TypeOf(m), nil)
	errs = append(errs, l.envErrors()...)
	for _, k := range md.Undecoded() {
		if under(k, reported) || slices.ContainsFunc(reported, func(r toml.Key) bool { return r.String() == k.String() }) {
			continue
		}
		reported = append(reported, k)
		errs = append(errs, &Error{File: name, Line: l.lines.line(k), Key: KeyPath(k...), Msg: unknownKeyMsg(k)})
	}
	if err := errs.orNil(); err != nil {
		return nil, err
	}
	if math.IsNaN(m.Sandbox.CPUs) || math.IsInf(m.Sandbox.CPUs, 0) {
		k := []string{"sandbox", "cpus"}
		return nil, &Error{File: name, Line: l.lines.line(k), Key: KeyPath(k...), Msg: fmt.Sprintf("must be a finite number, got %g", m.Sandbox.CPUs)}
	}
	l.presets = m.Presets
	return l, nil
}

// schemaErrors reports what BurntSushi/toml lets through: it matches struct fields
// case-insensitively (so `Command` counts as decoded, but TOML keys are
// case-sensitive and the merge works on the raw tables), and it accepts an empty
// array where a table belongs. t is the struct type raw decodes into.
func (l *layer) schemaErrors(raw map[string]any, t reflect.Type, path []string) (errs Errors, keys []toml.Key) {
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		var ft reflect.Type
		for i := 0; i < t.NumField(); i++ {
			if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); tag == k {
				ft = t.Field(i).Type
				break
			}
		}
		p := append(append([]string{}, path...), k)
		if ft == nil {
			keys = append(keys, toml.Key(p))
			errs = append(errs, &Error{File: l.name, Line: l.lines.line(p), Key: KeyPath(p...), Msg: unknownKeyMsg(p)})
			continue
		}
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() != reflect.Struct && ft.Kind() != reflect.Map || decodesItself(ft) {
			continue
		}
		sub, ok := raw[k].(map[string]any)
		if !ok {
			keys = append(keys, toml.Key(p))
			errs = append(errs, &Error{File: l.name, Line: l.lines.line(p), Key: KeyPath(p...), Msg: "wrong type: expected a table, got an array"})
			continue
		}
		switch {
		case ft.Kind() == reflect.Struct:
			e, k := l.schemaErrors(sub, ft, p)
			errs, keys = append(errs, e...), append(keys, k...)
		case ft.Elem().Kind() == reflect.Struct && !decodesItself(ft.Elem()):
			for _, name := range slices.Sorted(maps.Keys(sub)) {
				ep := append(append([]string{}, p...), name)
				e, ok := sub[name].(map[string]any)
				if !ok {
					keys = append(keys, toml.Key(ep))
					errs = append(errs, &Error{File: l.name, Line: l.lines.line(ep), Key: KeyPath(ep...), Msg: "wrong type: expected a table, got an array"})
					continue
				}
				e2, k2 := l.schemaErrors(e, ft.Elem(), ep)
				errs, keys = append(errs, e2...), append(keys, k2...)
			}
		}
	}
	return errs, keys
}

// selfDecodeError is an error of a type that checks its own TOML.
type selfDecodeError struct{ msg string }

func (e *selfDecodeError) Error() string { return e.msg }

// selfDecoded reports whether a key is one of a type that checks its own TOML
// (services.*.depends_on, services.*.ulimits.*): its error is about that key.
func selfDecoded(key string) bool {
	k := strings.Split(key, ".")
	return len(k) >= 3 && k[0] == "services" && (k[len(k)-1] == "depends_on" || k[len(k)-2] == "ulimits")
}

// decodesItself reports whether t checks its own TOML (a toml.Unmarshaler
// taking more than one shape, such as depends_on and ulimits).
func decodesItself(t reflect.Type) bool {
	// Env decodes itself for its removals, but is a table like any other.
	return t != reflect.TypeFor[Env]() && reflect.PointerTo(t).Implements(reflect.TypeFor[toml.Unmarshaler]())
}

// isEnvTable reports whether path names a table of variables: [env],
// daemons.<name>.env or services.<name>.env. In these a layer's false removes
// the variable a lower layer set.
func isEnvTable(path []string) bool {
	switch len(path) {
	case 1:
		return path[0] == "env"
	case 3:
		return (path[0] == "daemons" || path[0] == "services") && path[2] == "env"
	}
	return false
}

// envTables returns the tables of variables of a layer's raw tables, by key path.
func envTables(raw map[string]any) map[string][]string {
	out := map[string][]string{}
	if _, ok := raw["env"].(map[string]any); ok {
		out[KeyPath("env")] = []string{"env"}
	}
	for _, sec := range []string{"daemons", "services"} {
		entries, _ := raw[sec].(map[string]any)
		for name, e := range entries {
			e, _ := e.(map[string]any)
			if _, ok := e["env"].(map[string]any); ok {
				out[KeyPath(sec, name, "env")] = []string{sec, name, "env"}
			}
		}
	}
	return out
}

// envErrors reports the values of the layer's tables of variables that are
// neither a string nor false (a removal): the typed decode (Env.UnmarshalTOML)
// lets every value through.
func (l *layer) envErrors() Errors {
	var errs Errors
	tables := envTables(l.raw)
	for _, key := range slices.Sorted(maps.Keys(tables)) {
		path := tables[key]
		t := l.lookup(path)
		for _, k := range slices.Sorted(maps.Keys(t)) {
			p := append(append([]string{}, path...), k)
			switch v := t[k].(type) {
			case string:
			case bool:
				if v {
					errs = append(errs, &Error{File: l.name, Line: l.lines.line(p), Key: KeyPath(p...),
						Msg: `wrong type: expected a string, got true (false removes a variable a lower layer set; write "true" for the text)`})
				}
			default:
				errs = append(errs, &Error{File: l.name, Line: l.lines.line(p), Key: KeyPath(p...),
					Msg: "wrong type: expected a string, got " + rawTypeName(v)})
			}
		}
	}
	return errs
}

// lookup returns the raw table at path, or nil.
func (l *layer) lookup(path []string) map[string]any {
	t := l.raw
	for _, k := range path {
		t, _ = t[k].(map[string]any)
	}
	return t
}

// rawTypeName names the type of a decoded TOML value as the errors do.
func rawTypeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a table"
	case []any, []map[string]any:
		return "an array"
	}
	return "a date-time"
}

func under(k toml.Key, parents []toml.Key) bool {
	for _, p := range parents {
		if len(k) > len(p) && KeyPath(k[:len(p)]...) == KeyPath(p...) {
			return true
		}
	}
	return false
}

func unknownKeyMsg(k []string) string {
	if len(k) == 1 {
		return fmt.Sprintf("unknown key (top-level keys are presets, tools, sandbox, env, mounts, copies, daemons, services, compose)")
	}
	return "unknown key"
}

// tomlError turns a BurntSushi/toml error into an *Error of this layer.
func (l *layer) tomlError(err error, src string) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		line := pe.Position.Line
		if s := pe.Position.Start; s > 0 && s <= len(src) {
			// The parser counts a newline it stopped at as the next line
			// ("[env\n" is an error on line 1, not 2); the offset is exact.
			line = 1 + strings.Count(src[:s], "\n")
		}
		e := &Error{File: l.name, Line: line, Msg: friendlyTOML(pe.Message)}
		if pe.LastKey != "" && (strings.Contains(pe.Message, "incompatible types") || selfDecoded(pe.LastKey)) {
			e.Key = pe.LastKey
		}
		return e
	}
	msg := err.Error()
	if m := typeErrRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		key := strings.ReplaceAll(m[2], `\"`, `"`)
		if line == 0 {
			line = l.lines.line(strings.Split(key, "."))
		}
		return &Error{File: l.name, Line: line, Key: key, Msg: friendlyTOML(m[3])}
	}
	return &Error{File: l.name, Msg: friendlyTOML(strings.TrimPrefix(msg, "toml: "))}
}

func friendlyTOML(msg string) string {
	if m := badTypeRE.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("wrong type: expected %s, got %s", tomlTypeName(m[2]), tomlTypeName(m[1]))
	}
	if m := mismatchRE.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("wrong type: expected %s, got %s", tomlTypeName(m[1]), tomlTypeName(m[2]))
	}
	return msg
}

func tomlTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "int"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "time.Time":
		return "a date-time"
	case t == "bool" || t == "boolean":
		return "a boolean"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]") || t == "slice" || t == "array":
		return "an array"
	case strings.HasPrefix(t, "map") || t == "struct" || t == "table":
		return "a table"
	}
	return t
}
