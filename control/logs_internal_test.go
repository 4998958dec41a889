package control

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/supervisor"
)

// logs -n N keeps what tail -n N keeps: a last line without a newline is one of
// the N lines, not an extra one. A stopped sandbox's start of the last lines
// (lineStarts, over the whole stream) and a running one's (supervisor.TailStart,
// backwards from the end) agree.
func TestLastLinesCountsAPartialLastLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc", 1, "c\n"},
		{"a\nb\nc", 2, "b\nc\n"},
		{"a\nb\nc", 0, ""},
		{"a\nb\nc", 5, "a\nb\nc\n"},
		{"a\nb\n", 1, "b\n"},
		{"a\nb\n", 0, ""},
		{"a\n\n\nb\n", 2, "\nb\n"},
		{"\n", 1, "\n"},
		{"", 3, ""},
	} {
		// Written in pieces, as a stream arrives.
		l := &lineStarts{n: c.n}
		for i := 0; i < len(c.in); i += 2 {
			_, _ = l.Write([]byte(c.in[i:min(i+2, len(c.in))]))
		}
		back, err := supervisor.TailStart(strings.NewReader(c.in), int64(len(c.in)), c.n)
		if err != nil {
			t.Fatal(err)
		}
		for what, from := range map[string]int64{"lineStarts": l.start(int64(len(c.in))), "TailStart": back} {
			// What a reader shows: a last line without a newline ends with one.
			got := c.in[from:]
			if got != "" && !strings.HasSuffix(got, "\n") {
				got += "\n"
			}
			if got != c.want {
				t.Errorf("%s: last %d lines of %q = %q, want %q", what, c.n, c.in, got, c.want)
			}
		}
	}
}

// lineStarts holds offsets only, and finds the last lines of a stream of long
// lines written in pieces.
func TestLineStartsOfLongLines(t *testing.T) {
	const max = supervisor.MaxLogLine
	long := strings.Repeat("x", 3*max+10)
	in := "short\n" + strings.Repeat("y", max) + "\n" + long + "\nafter\n" + long
	l := &lineStarts{n: 3}
	for i := 0; i < len(in); i += 7777 {
		_, _ = l.Write([]byte(in[i:min(i+7777, len(in))]))
	}
	if from := l.start(int64(len(in))); in[from:] != long+"\nafter\n"+long {
		t.Errorf("lineStarts: the last 3 lines start at %d", from)
	}
	if len(l.offsets) != 3 {
		t.Errorf("lineStarts holds %d offsets, want 3", len(l.offsets))
	}
}
