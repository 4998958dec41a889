package manifest

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// KeyPath joins key segments into a TOML dotted key, quoting the segments that
// are not bare keys: env."A.B", services.db.env."A\u00A0B". It is the one
// spelling of a key path: errors, `config --layers`, the keys of
// Resolved.Sources and of Redacted's values, and the secret keys the sandbox
// writes into the supervisor's spec all use it, so a lookup by key path never
// misses because two places quote a name differently.
//
// A quoted segment is a TOML basic string: `"` and `\` are escaped, so are
// control characters and every other character that is not printable (a
// non-breaking space, a line separator) as \t, \n, … or \uXXXX, so the key
// reads unambiguously in a message and can be pasted back into a manifest.
// Distinct segments give distinct key paths (for UTF-8 text: a manifest,
// TOML or JSON, holds nothing else).
func KeyPath(parts ...string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('.')
		}
		if bareKey.MatchString(p) {
			b.WriteString(p)
		} else {
			quoteKey(&b, p)
		}
	}
	return b.String()
}

func quoteKey(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			// Not UTF-8: TOML cannot spell it. The escape keeps it apart
			// from a real U+FFFD, which is printable and written as is.
			b.WriteString(`\uFFFD`)
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\r':
			b.WriteString(`\r`)
		case !unicode.IsPrint(r):
			if r > 0xFFFF {
				fmt.Fprintf(b, `\U%08X`, r)
			} else {
				fmt.Fprintf(b, `\u%04X`, r)
			}
		default:
			b.WriteRune(r)
		}
		i += size
	}
	b.WriteByte('"')
}
