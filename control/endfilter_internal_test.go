package control

import (
	"bytes"
	"testing"

	"github.com/airlock-dev/airlock/supervisor"
)

// TestEndFilter: the output up to the end marker passes whole, whatever the
// writes' boundaries; the marker and what follows do not; a marker of another
// nonce, and an escape sequence that only starts like one, pass as output.
func TestEndFilter(t *testing.T) {
	const nonce = "00112233445566778899aabbccddeeff"
	output := "line 1\n\x1b[31mred\x1b[0m " + supervisor.EndMarker("another", 1) + "\x1b_airlock-end:" + nonce[:5] + " tail\n"
	stream := output + supervisor.EndMarker(nonce, 42) + "after the marker\n"
	for size := 1; size <= len(stream); size++ {
		var out bytes.Buffer
		code := -1
		f := newEndFilter(&out, nonce, func(m supervisor.EndMark) { code = m.Code })
		for b := []byte(stream); len(b) > 0; {
			n := min(size, len(b))
			if _, err := f.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
		f.flush()
		if out.String() != output || code != 42 {
			t.Fatalf("writes of %d bytes: output %q, code %d; want %q, 42", size, out.String(), code, output)
		}
	}
	// A sealed marker carrying the status stream, written a few bytes at a time.
	status := []byte("{\"kind\":\"supervisor.ready\"}\n{\"kind\":\"main.exited\",\"exit_code\":3}\n")
	stream = output + supervisor.SealedEndMarker(nonce, 3, status) + "after\n"
	for _, size := range []int{1, 7, 64, len(stream)} {
		var out bytes.Buffer
		var got supervisor.EndMark
		f := newEndFilter(&out, nonce, func(m supervisor.EndMark) { got = m })
		for b := []byte(stream); len(b) > 0; {
			n := min(size, len(b))
			_, _ = f.Write(b[:n])
			b = b[n:]
		}
		f.flush()
		if out.String() != output || got.Code != 3 || !got.Sealed || !bytes.Equal(got.Status, status) {
			t.Fatalf("writes of %d bytes: output %q, marker %+v", size, out.String(), got)
		}
	}
	// Without a marker, flush gives back what was held.
	var out bytes.Buffer
	f := newEndFilter(&out, nonce, func(supervisor.EndMark) { t.Error("found a marker") })
	_, _ = f.Write([]byte("end\x1b_airlock-end:" + nonce))
	f.flush()
	if out.String() != "end\x1b_airlock-end:"+nonce {
		t.Errorf("flushed %q", out.String())
	}
}
