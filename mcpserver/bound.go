package mcpserver

import (
	"fmt"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/internal/termsafe"
)

// MaxStream is how much of one stream (a command's stdout, its stderr, a
// file, a log, an event history) a result holds.
const MaxStream = 64 << 10

// headTail keeps the first and the last MaxStream/2 bytes written to it and
// counts the rest: a command's output as the model sees it, its start and its
// end, with a note of what was cut between.
type headTail struct {
	max   int
	head  []byte
	tail  []byte // a ring of max/2 bytes once the head is full
	start int    // where the ring begins in tail
	total int64
}

func newHeadTail(max int) *headTail { return &headTail{max: max} }

func (b *headTail) Write(p []byte) (int, error) {
	n := len(p)
	b.total += int64(n)
	half := b.max / 2
	if room := half - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		if len(b.tail) < b.max-half {
			k := min(b.max-half-len(b.tail), len(p))
			b.tail = append(b.tail, p[:k]...)
			p = p[k:]
			continue
		}
		// The ring is full: overwrite its oldest bytes.
		if len(p) >= len(b.tail) {
			p = p[len(p)-len(b.tail):]
			copy(b.tail, p)
			b.start = 0
			break
		}
		k := copy(b.tail[b.start:], p)
		if k < len(p) {
			k += copy(b.tail, p[k:])
		}
		b.start = (b.start + len(p)) % len(b.tail)
		p = nil
	}
	return n, nil
}

// cut is how many bytes were not kept.
func (b *headTail) cut() int64 { return b.total - int64(len(b.head)+len(b.tail)) }

// String is what was kept, escaped (termsafe.Text), with a line saying how
// many bytes were cut where they were.
func (b *headTail) String() string {
	tail := append(append([]byte{}, b.tail[b.start:]...), b.tail[:b.start]...)
	if b.cut() == 0 {
		return safeText(append(append([]byte{}, b.head...), tail...))
	}
	return safeText(trimRuneEnd(b.head)) + fmt.Sprintf("\n[airlock: %d of %d bytes cut here]\n", b.cut(), b.total) + safeText(trimRuneStart(tail))
}

// note says what a result left out, for the model; "" when nothing.
func cutNote(stream string, cut, total int64) string {
	if cut <= 0 {
		return ""
	}
	return fmt.Sprintf("%s: %d of %d bytes cut (%d kept)", stream, cut, total, total-cut)
}

// safeText is text from a sandbox as a result carries it: control characters
// other than newline and tab shown as escapes (\x1b), invalid UTF-8 too.
func safeText(b []byte) string { return termsafe.Text(string(b)) }

// trimRuneEnd drops an incomplete UTF-8 sequence a cut left at b's end.
func trimRuneEnd(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		r := b[len(b)-i]
		if r < utf8.RuneSelf {
			return b
		}
		if utf8.RuneStart(r) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// trimRuneStart drops the continuation bytes a cut left at b's start.
func trimRuneStart(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && i < len(b); i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}

// lastBytes keeps the last max bytes of b, from a line's start when it can:
// for logs and events, whose newest part matters most.
func lastBytes(b []byte, max int) (kept []byte, cut int) {
	if len(b) <= max {
		return b, 0
	}
	kept = b[len(b)-max:]
	for i, c := range kept {
		if c == '\n' && i+1 < len(kept) {
			kept = kept[i+1:]
			break
		}
	}
	return trimRuneStart(kept), len(b) - len(kept)
}
