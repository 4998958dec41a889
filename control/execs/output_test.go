package execs

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
)

// TestExecOutputCapped: the writer behind an API exec's output files keeps at
// most its limit of output, whatever the sizes of the writes, then one marker
// line; it accepts (and discards) every later write; a file that cannot be
// written (a full disk) is cut the same way, saying why.
func TestExecOutputCapped(t *testing.T) {
	t.Parallel()
	for _, chunk := range []int{1, 7, 100, 1000, 5000} {
		var buf bytes.Buffer
		var why []string
		c := newCappedOutput(&buf, 1000, func(w string) { why = append(why, w) })
		for written := 0; written < 5000; written += chunk {
			if n, err := c.Write(bytes.Repeat([]byte("y"), chunk)); n != chunk || err != nil {
				t.Fatalf("chunk %d: Write = %d, %v; want every byte taken", chunk, n, err)
			}
		}
		body, marker, ok := strings.Cut(buf.String(), "\n[airlock: output truncated: ")
		if !ok || len(body) != 1000 || strings.Trim(body, "y") != "" || !c.Truncated() || len(why) != 1 {
			t.Errorf("chunk %d: %d bytes before the marker, truncated %v, told %q; file %q", chunk, len(body), c.Truncated(), why, buf.String())
		}
		if want := "it reached 1000 bytes (artifacts.exec_output_max); the rest was discarded]\n"; marker != want {
			t.Errorf("chunk %d: marker %q, want %q", chunk, marker, want)
		}
	}
	// Exactly the limit is not cut.
	var buf bytes.Buffer
	c := newCappedOutput(&buf, 10, nil)
	_, _ = c.Write([]byte("0123456789"))
	if c.Truncated() || buf.String() != "0123456789" {
		t.Errorf("exactly the limit: truncated %v, %q", c.Truncated(), buf.String())
	}
	// A write error cuts the file, once.
	fw := &failingWriter{after: 4}
	c = newCappedOutput(fw, 1000, nil)
	for range 3 {
		if n, err := c.Write([]byte("abcdef")); n != 6 || err != nil {
			t.Fatalf("Write after a failure = %d, %v", n, err)
		}
	}
	if !c.Truncated() || fw.calls != 2 {
		t.Errorf("a full disk: truncated %v after %d writes to the file, want truncated after 2 (the data, the marker)", c.Truncated(), fw.calls)
	}
	if !strings.Contains(fw.last, "cannot write the rest: no space left on device") {
		t.Errorf("the marker does not say why: %q", fw.last)
	}
}

// failingWriter takes after bytes, then fails as a full disk does.
type failingWriter struct {
	after, n, calls int
	last            string
}

func (f *failingWriter) Write(p []byte) (int, error) {
	f.calls++
	f.last = string(p)
	if f.n+len(p) > f.after {
		k := max(f.after-f.n, 0)
		f.n += k
		return k, syscall.ENOSPC
	}
	f.n += len(p)
	return len(p), nil
}
