package manifest

import (
	"strconv"
	"strings"
)

// keyLines maps the key paths of a TOML document to the line that defines them.
// BurntSushi/toml keeps key positions private, so this is a small tolerant scanner
// of its own: it knows table headers, dotted and quoted keys, comments, strings
// (multi-line included) and values that span lines. It never fails; a key it did
// not see is looked up by its longest known prefix.
type keyLines map[string]int

// line returns the line of path, or of its longest known prefix, or 0.
func (kl keyLines) line(path []string) int {
	for n := len(path); n > 0; n-- {
		if l, ok := kl[KeyPath(path[:n]...)]; ok {
			return l
		}
	}
	return 0
}

func scanKeyLines(src string) keyLines {
	kl := keyLines{}
	s := &lineScanner{}
	var table []string
	for i, line := range strings.Split(src, "\n") {
		n := i + 1
		if s.multi != "" || s.depth > 0 {
			s.value(line)
			continue
		}
		t := strings.TrimSpace(line)
		switch {
		case t == "" || t[0] == '#':
		case strings.HasPrefix(t, "[[") || t[0] == '[':
			inner := strings.TrimLeft(t, "[")
			keys, _ := parseKey(inner)
			if len(keys) > 0 {
				table = keys
				if _, seen := kl[KeyPath(keys...)]; !seen {
					kl[KeyPath(keys...)] = n
				}
			}
		default:
			keys, rest := parseKey(t)
			if len(keys) == 0 {
				continue
			}
			full := append(append([]string{}, table...), keys...)
			kl[KeyPath(full...)] = n
			rest = strings.TrimSpace(rest)
			if strings.HasPrefix(rest, "=") {
				s.value(rest[1:])
			}
		}
	}
	return kl
}

// parseKey reads a dotted key (bare, "basic" or 'literal' segments) from the start
// of s and returns its segments and what follows it.
func parseKey(s string) ([]string, string) {
	var keys []string
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return keys, s
		}
		var seg string
		switch s[0] {
		case '"':
			var ok bool
			if seg, s, ok = basicKey(s); !ok {
				return nil, ""
			}
		case '\'':
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return nil, ""
			}
			seg, s = s[1:end+1], s[end+2:]
		default:
			end := 0
			for end < len(s) && (isBareKeyByte(s[end])) {
				end++
			}
			if end == 0 {
				return nil, ""
			}
			seg, s = s[:end], s[end:]
		}
		keys = append(keys, seg)
		s = strings.TrimLeft(s, " \t")
		if !strings.HasPrefix(s, ".") {
			return keys, s
		}
		s = s[1:]
	}
}

// basicKey reads a "basic" quoted key at the start of s, escapes decoded as TOML
// does (so that "A\u00A0B" finds the key KeyPath spells that way), and returns
// it and what follows the closing quote.
func basicKey(s string) (key, rest string, ok bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], true
		case '\\':
			if i+1 >= len(s) {
				return "", "", false
			}
			i++
			switch e := s[i]; e {
			case 'b':
				b.WriteByte('\b')
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			case 'f':
				b.WriteByte('\f')
			case 'r':
				b.WriteByte('\r')
			case 'e':
				b.WriteByte(0x1b)
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if i+n >= len(s) {
					return "", "", false
				}
				r, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
				if err != nil {
					return "", "", false
				}
				b.WriteRune(rune(r))
				i += n
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}

func isBareKeyByte(c byte) bool {
	return c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// lineScanner follows the parts of a value that can span lines: multi-line strings
// and nested arrays or inline tables.
type lineScanner struct {
	multi string // `"""` or `'''` while inside a multi-line string
	depth int    // open [ and { outside strings
}

func (s *lineScanner) value(v string) {
	for i := 0; i < len(v); i++ {
		if s.multi != "" {
			if strings.HasPrefix(v[i:], s.multi) {
				i += 2
				s.multi = ""
			} else if v[i] == '\\' && s.multi == `"""` {
				i++
			}
			continue
		}
		switch c := v[i]; c {
		case '#':
			return
		case '[', '{':
			s.depth++
		case ']', '}':
			if s.depth > 0 {
				s.depth--
			}
		case '"', '\'':
			q := string([]byte{c, c, c})
			if strings.HasPrefix(v[i:], q) {
				s.multi = q
				i += 2
				continue
			}
			for i++; i < len(v) && v[i] != c; i++ {
				if c == '"' && v[i] == '\\' {
					i++
				}
			}
		}
	}
}
