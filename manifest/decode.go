package manifest

import (
	"errors"
	"fmt"
	"regexp"
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

// decodeLayer decodes one file strictly: bad TOML, wrong types and unknown keys are
// errors naming the file, the line and the key path.
func decodeLayer(name string, data []byte) (*layer, error) {
	src := string(data)
	l := &layer{name: name, lines: scanKeyLines(src)}
	if _, err := toml.Decode(src, &l.raw); err != nil {
		return nil, l.tomlError(err)
	}
	var m Manifest
	md, err := toml.Decode(src, &m)
	if err != nil {
		return nil, l.tomlError(err)
	}
	var errs Errors
	var reported []toml.Key
	for _, k := range md.Undecoded() {
		if under(k, reported) {
			continue
		}
		reported = append(reported, k)
		errs = append(errs, &Error{File: name, Line: l.lines.line(k), Key: keyPath(k...), Msg: unknownKeyMsg(k)})
	}
	if err := errs.orNil(); err != nil {
		return nil, err
	}
	l.presets = m.Presets
	return l, nil
}

func under(k toml.Key, parents []toml.Key) bool {
	for _, p := range parents {
		if len(k) > len(p) && keyPath(k[:len(p)]...) == keyPath(p...) {
			return true
		}
	}
	return false
}

func unknownKeyMsg(k toml.Key) string {
	if len(k) == 1 {
		return fmt.Sprintf("unknown key (top-level keys are presets, tools, sandbox, env, mounts, copies, daemons, services)")
	}
	return "unknown key"
}

// tomlError turns a BurntSushi/toml error into an *Error of this layer.
func (l *layer) tomlError(err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		e := &Error{File: l.name, Line: pe.Position.Line, Msg: friendlyTOML(pe.Message)}
		if pe.LastKey != "" && strings.Contains(pe.Message, "incompatible types") {
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
	return msg
}

func tomlTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "int"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
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
