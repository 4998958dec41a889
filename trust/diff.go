package trust

import (
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/internal/termsafe"
)

// maxDiffLines bounds the lines of either side a diff compares line by line.
const maxDiffLines = 4000

// Diff returns a line diff of old and new (nil old: the file was no layer),
// with up to 3 lines of context around each change: lines start with " ",
// "-" or "+", and "@@ line N @@" opens each hunk. Control characters other
// than tabs are shown escaped: the content may come from inside a sandbox.
func Diff(name string, old *File, new File) string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s (accepted)\n+++ %s (now)\n", name, name)
	switch {
	case old == nil || old.Absent:
		if new.Absent {
			return b.String()
		}
		if old == nil {
			b.WriteString("(not a layer when last accepted)\n")
		} else {
			b.WriteString("(absent when last accepted)\n")
		}
	case new.Absent:
		b.WriteString("(now absent)\n")
	}
	if (old != nil && !old.Stored()) || !new.Stored() {
		fmt.Fprintf(&b, "(too large to show: %d bytes -> %d bytes)\n", sizeOf(old), new.Size)
		return b.String()
	}
	var ol, nl []string
	if old != nil {
		ol = lines(old.Content)
	}
	nl = lines(new.Content)
	if len(ol) > maxDiffLines || len(nl) > maxDiffLines {
		fmt.Fprintf(&b, "(too long to show: %d lines -> %d lines)\n", len(ol), len(nl))
		return b.String()
	}
	ops := editScript(ol, nl)
	const context = 3
	keep := make([]bool, len(ops))
	for i, op := range ops {
		if op.kind != ' ' {
			for j := max(0, i-context); j <= min(len(ops)-1, i+context); j++ {
				keep[j] = true
			}
		}
	}
	last := -2
	for i, op := range ops {
		if !keep[i] {
			continue
		}
		if i != last+1 {
			fmt.Fprintf(&b, "@@ line %d @@\n", op.line)
		}
		last = i
		b.WriteByte(op.kind)
		b.WriteString(termsafe.Text(op.text))
		b.WriteByte('\n')
	}
	return b.String()
}

func sizeOf(f *File) int64 {
	if f == nil {
		return 0
	}
	return f.Size
}

func lines(data []byte) []string {
	s := strings.TrimSuffix(string(data), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

type edit struct {
	kind byte // ' ', '-', '+'
	text string
	line int // in the new file (the old one for '-')
}

// editScript is a longest-common-subsequence edit script from a to b.
func editScript(a, b []string) []edit {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []edit
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out = append(out, edit{' ', a[i], j + 1})
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, edit{'-', a[i], i + 1})
			i++
		default:
			out = append(out, edit{'+', b[j], j + 1})
			j++
		}
	}
	return out
}
