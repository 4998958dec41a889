package manifest

import "strings"

// keyLines maps the key paths of a TOML document to the line that defines them.
// BurntSushi/toml keeps key positions private, so this is a small tolerant scanner
// of its own: it knows table headers, dotted and quoted keys, comments, strings
// (multi-line included) and values that span lines. It never fails; a key it did
// not see is looked up by its longest known prefix.
type keyLines map[string]int

// line returns the line of path, or of its longest known prefix, or 0.
func (kl keyLines) line(path []string) int {
	for n := len(path); n > 0; n-- {
		if l, ok := kl[keyPath(path[:n]...)]; ok {
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
				if _, seen := kl[keyPath(keys...)]; !seen {
					kl[keyPath(keys...)] = n
				}
			}
		default:
			keys, rest := parseKey(t)
			if len(keys) == 0 {
				continue
			}
			full := append(append([]string{}, table...), keys...)
			kl[keyPath(full...)] = n
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
			end := 1
			var b strings.Builder
			for end < len(s) && s[end] != '"' {
				if s[end] == '\\' && end+1 < len(s) {
					end++
				}
				b.WriteByte(s[end])
				end++
			}
			if end >= len(s) {
				return nil, ""
			}
			seg, s = b.String(), s[end+1:]
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
