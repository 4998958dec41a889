// Package termsafe makes text that came from inside a sandbox safe to print on
// the user's terminal: a reason, a daemon's name, an event's field, a line of a
// supervisor's output. Code inside a sandbox is not trusted (docs/security.md);
// a control character it slips into such text (ESC starts an escape sequence
// that can retitle or recolour the terminal, rewrite the screen or, on some
// terminals, answer with input) is printed as a visible escape instead:
// `\x1b`, `\x07`, `\u009b`.
//
// Escaped: every C0 control (U+0000 to U+001F), DEL (U+007F), every C1 control
// (U+0080 to U+009F, which some terminals take as ESC sequences) and every byte
// that is not valid UTF-8 (a lone 0x9b is CSI on an 8-bit terminal). Line keeps
// nothing else, for single-line fields; Text keeps newlines and tabs, for
// messages of several lines. A backslash is not escaped: the text stays
// readable, and what is escaped can still be told apart by its context.
//
// Byte streams the user asked for (`airlock logs`, the main command's output,
// `exec`) are never filtered.
package termsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Line returns s with every control character escaped, newlines and tabs
// included: for one-line fields (a reason, a name, an event's detail).
func Line(s string) string { return escape(s, false) }

// Text returns s with every control character but newline and tab escaped: for
// messages that may span lines (an error's text).
func Text(s string) string { return escape(s, true) }

// Safe reports whether s needs no escaping as a line.
func Safe(s string) bool { return Line(s) == s }

func escape(s string, keepLines bool) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		if keepLines && (c == '\n' || c == '\t') {
			i++
			continue
		}
		if c >= 0x80 {
			r, size := utf8.DecodeRuneInString(s[i:])
			if (r != utf8.RuneError || size > 1) && !isC1(r) {
				i += size
				continue
			}
		}
		break
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		switch {
		case keepLines && (c == '\n' || c == '\t'):
			b.WriteByte(c)
			i++
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
			i++
		case c < 0x80:
			b.WriteByte(c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size <= 1:
				fmt.Fprintf(&b, `\x%02x`, c)
				i++
			case isC1(r):
				fmt.Fprintf(&b, `\u%04x`, r)
				i += size
			default:
				b.WriteString(s[i : i+size])
				i += size
			}
		}
	}
	return b.String()
}

func isC1(r rune) bool { return r >= 0x80 && r <= 0x9f }

// JSON escapes, in JSON that encoding/json wrote, what it leaves raw and a
// terminal may act on: DEL and the C1 controls, as \u007f and \u0080 to \u009f
// (the same characters, to a JSON reader). encoding/json escapes the C0
// controls itself and replaces invalid UTF-8.
func JSON(b []byte) []byte {
	if !needsJSON(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		c := b[i]
		if c == 0x7f {
			out = append(out, `\u007f`...)
			i++
			continue
		}
		if c < 0x80 {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if isC1(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

func needsJSON(b []byte) bool {
	for i := 0; i < len(b); {
		c := b[i]
		if c == 0x7f {
			return true
		}
		if c < 0x80 {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if isC1(r) {
			return true
		}
		i += size
	}
	return false
}

// maxPending bounds an escape sequence or a rune a Writer holds back until the
// rest of it arrives.
const maxPending = 32

// Writer escapes, as Text does, what is written to it before passing it to w,
// except SGR sequences (colours: ESC [ digits and semicolons m), the two
// sequences the supervisor's shutdown spinner draws with (cursor up, ESC [ n
// A, and erase below, ESC [ J) and a TTY's line ends ("\r\n"): for a
// sandbox's messages relayed to the user,
// such as its supervisor's shutdown lines. A sequence or a rune split across
// two writes is held back until it is whole (Flush writes what is left, escaped).
type Writer struct {
	w       io.Writer
	pending []byte
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p, escaped; it reports len(p) unless w fails.
func (sw *Writer) Write(p []byte) (int, error) {
	data := p
	if len(sw.pending) > 0 {
		data = append(sw.pending, p...)
		sw.pending = nil
	}
	var out []byte
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f):
			out = append(out, c)
			i++
		case c == '\r' && i+1 == len(data):
			sw.pending = []byte{c} // a TTY's line end, "\r\n", split?
			i++
		case c == '\r' && data[i+1] == '\n':
			out = append(out, c)
			i++
		case c == 0x1b:
			n, complete := allowedSequence(data[i:])
			if !complete && len(data)-i < maxPending {
				sw.pending = append([]byte(nil), data[i:]...)
				i = len(data)
				continue
			}
			if n > 0 {
				out = append(out, data[i:i+n]...)
				i += n
				continue
			}
			out = append(out, `\x1b`...)
			i++
		case c < 0x80:
			out = fmt.Appendf(out, `\x%02x`, c)
			i++
		default:
			if !utf8.FullRune(data[i:]) {
				sw.pending = append([]byte(nil), data[i:]...)
				i = len(data)
				continue
			}
			r, size := utf8.DecodeRune(data[i:])
			switch {
			case r == utf8.RuneError && size <= 1:
				out = fmt.Appendf(out, `\x%02x`, c)
			case isC1(r):
				out = fmt.Appendf(out, `\u%04x`, r)
			default:
				out = append(out, data[i:i+size]...)
			}
			i += size
		}
	}
	if len(out) > 0 {
		if _, err := sw.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes what a Write held back (an unfinished sequence), escaped.
func (sw *Writer) Flush() error {
	if len(sw.pending) == 0 {
		return nil
	}
	s := Text(string(sw.pending))
	sw.pending = nil
	_, err := io.WriteString(sw.w, s)
	return err
}

// allowedSequence reports the length of the allowed escape sequence b starts
// with (0 if it is not one), and whether b holds enough to tell.
func allowedSequence(b []byte) (n int, complete bool) {
	if len(b) < 2 {
		return 0, false
	}
	if b[1] != '[' {
		return 0, true
	}
	for i := 2; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9', c == ';':
			if i >= maxPending {
				return 0, true
			}
		case c == 'm', c == 'A' && !strings.Contains(string(b[2:i]), ";"), c == 'J' && i == 2:
			return i + 1, true
		default:
			return 0, true
		}
	}
	return 0, false
}
