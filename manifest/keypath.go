package manifest

import (
	"regexp"
	"strings"
)

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// keyPath joins key segments into a TOML dotted key, quoting segments that are
// not bare keys: env."A.B".
func keyPath(parts ...string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('.')
		}
		if bareKey.MatchString(p) {
			b.WriteString(p)
		} else {
			b.WriteString(quoteKey(p))
		}
	}
	return b.String()
}

func quoteKey(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\r", `\r`)
	return `"` + r.Replace(s) + `"`
}

// join appends segments to an existing key path.
func join(prefix string, parts ...string) string {
	if prefix == "" {
		return keyPath(parts...)
	}
	return prefix + "." + keyPath(parts...)
}
