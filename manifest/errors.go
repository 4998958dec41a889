package manifest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Error is one problem with a manifest, located by file, line and key path where
// those are known. Its text never contains a substituted value.
type Error struct {
	File string // the layer's file (or "preset <name>" for a built-in), "" when unknown
	Line int    // 1-based line in File, 0 when unknown
	Key  string // the TOML key path, e.g. daemons.redis.signal
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one pass, sorted by file, line and key.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

func (es Errors) sorted() Errors {
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].File != es[j].File {
			return es[i].File < es[j].File
		}
		if es[i].Line != es[j].Line {
			return es[i].Line < es[j].Line
		}
		return es[i].Key < es[j].Key
	})
	return es
}

// orNil returns nil for an empty list, so callers can write `return errs.orNil()`.
func (es Errors) orNil() error {
	if len(es) == 0 {
		return nil
	}
	return es.sorted()
}

// IsConfigError reports whether err is a manifest problem (the CLI's exit code 2).
func IsConfigError(err error) bool {
	var e *Error
	var es Errors
	return errors.As(err, &e) || errors.As(err, &es)
}
