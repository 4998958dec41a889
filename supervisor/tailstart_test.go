package supervisor

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// zeros is a file of size NUL bytes (a sparse log without a newline) with an
// optional end, counting what is read of it.
type zeros struct {
	size int64
	end  string
	read int64
}

func (z *zeros) ReadAt(p []byte, off int64) (int, error) {
	total := z.size + int64(len(z.end))
	if off >= total {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && off+int64(n) < total {
		if i := off + int64(n); i >= z.size {
			p[n] = z.end[i-z.size]
		} else {
			p[n] = 0
		}
		n++
	}
	z.read += int64(n)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestTailStartReadsOnlyTheEnd: the last lines of a huge log are found by
// reading from the end back to their start, not the file; one line without a
// newline starts at 0.
func TestTailStartReadsOnlyTheEnd(t *testing.T) {
	z := &zeros{size: 3 << 30, end: "\nlast line\n"}
	total := z.size + int64(len(z.end))
	from, err := TailStart(z, total, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := total - int64(len("last line\n")); from != want {
		t.Errorf("TailStart = %d, want %d", from, want)
	}
	if z.read > 2*64<<10 {
		t.Errorf("TailStart read %d bytes of the file", z.read)
	}
	if from, _ := TailStart(z, total, 0); from != total {
		t.Errorf("TailStart(0) = %d, want %d", from, total)
	}
	if from, _ := TailStart(&zeros{size: 200 << 10, end: "x"}, 200<<10+1, 5); from != 0 {
		t.Errorf("TailStart of one line = %d, want 0", from)
	}
}

// TestTailCutsLongLines: supervise tail --lines N --max-line M of a sparse 1 GiB
// log without a newline prints the first M bytes of its one line and a marker;
// lines around it are whole.
func TestTailCutsLongLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("before\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("end\nafter"), 1<<30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	long := int64(1<<30 - len("before\n") + len("end"))
	for _, c := range []struct {
		lines int
		want  string
	}{
		{-1, "before\n" + strings.Repeat("\x00", 100) + LineCut(long-100) + "\nafter"},
		{2, strings.Repeat("\x00", 100) + LineCut(long-100) + "\nafter"},
		{1, "after"},
	} {
		var out bytes.Buffer
		err := Tail(context.Background(), TailOptions{Path: p, ByLines: c.lines >= 0, Lines: c.lines, MaxLine: 100, Out: &out})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimPrefix(out.String(), TailHeader); got != c.want {
			t.Errorf("tail --lines %d: %d bytes %q, want %d bytes", c.lines, len(got), got[max(0, len(got)-80):], len(c.want))
		}
	}
	// A cut line without its newline yet ends with the marker.
	var out bytes.Buffer
	if _, err := (&lineCutter{w: &out, max: 3}).Write([]byte("abcdef")); err != nil {
		t.Fatal(err)
	}
	lc := &lineCutter{w: &out, max: 3}
	_, _ = lc.Write([]byte("abcdef"))
	_ = lc.flush()
	if got := out.String(); got != "abcabc"+LineCut(3) {
		t.Errorf("lineCutter: %q", got)
	}
}

// TestTailLines: supervise tail --lines N prints the last N lines.
func TestTailLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(p, []byte("a\nb\nc\nd"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Tail(context.Background(), TailOptions{Path: p, ByLines: true, Lines: 2, Out: &out}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimPrefix(out.String(), TailHeader); got != "c\nd" {
		t.Errorf("tail --lines 2 = %q, want %q", got, "c\nd")
	}
}
