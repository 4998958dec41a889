package supervisor

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestEndMarker: with an end marker in the spec (a run that need not wait for
// its daemons' shutdown, issue 24), the supervisor marks the end of the main
// command's output on stdout and stderr once the main command exited and the
// daemons that stop within a moment did: their lines come before the marker,
// a slow daemon's after it. The code is the main command's.
func TestEndMarker(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.spec.EndMarker = "0123456789abcdef"
	s.daemon("quick", sh("exec sleep 100"))
	// Ready once its trap is set: a SIGTERM before would end it at once.
	slowD := s.daemon("slow", sh(fmt.Sprintf("trap 'sleep 1; exit 0' TERM; touch %q; while :; do sleep 0.05; done", s.path("trapped"))))
	slowD.Ready = &Ready{Cmd: []string{"test", "-e", s.path("trapped")}, Timeout: "20s"}
	s.spec.Main.Argv = sh("echo out; echo err >&2; exit 3")
	r := s.run()
	if r.code != 3 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	marker := EndMarker("0123456789abcdef", 3)
	if want := "out\n" + marker; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	quick := strings.Index(r.stderr, "✔ daemon quick: shut down")
	end := strings.Index(r.stderr, marker)
	slow := strings.Index(r.stderr, "✔ daemon slow: shut down")
	if !strings.HasPrefix(r.stderr, "err\n") || quick < 0 || end < quick || slow < end {
		t.Errorf("stderr: want err, the quick daemon's line, the marker, then the slow one's:\n%q", r.stderr)
	}
	m, ok := ParseEndMarker([]byte(marker), "0123456789abcdef")
	if !ok || m.Code != 3 || m.Sealed || m.Status != nil {
		t.Errorf("ParseEndMarker(%q) = %+v, %v", marker, m, ok)
	}
	sm := SealedEndMarker("0123456789abcdef", 255, nil)
	if m, ok := ParseEndMarker([]byte(sm), "0123456789abcdef"); !ok || m.Code != 255 || !m.Sealed || m.Status != nil {
		t.Errorf("ParseEndMarker(%q) = %+v, %v", sm, m, ok)
	}
	// A sealed marker carries the status stream, up to MaxMarkedStatus.
	status := []byte(strings.Repeat("{\"kind\":\"main.exited\"}\n", MaxMarkedStatus/24))
	sm = SealedEndMarker("0123456789abcdef", 7, status)
	if m, ok := ParseEndMarker([]byte(sm), "0123456789abcdef"); !ok || m.Code != 7 || !m.Sealed || !bytes.Equal(m.Status, status) || len(sm) > MaxEndMarker {
		t.Errorf("ParseEndMarker of a sealed marker with %d bytes of status = %+v, %v (marker of %d bytes, max %d)", len(status), m.Code, ok, len(sm), MaxEndMarker)
	}
	if m, ok := ParseEndMarker([]byte(SealedEndMarker("0123456789abcdef", 7, make([]byte, MaxMarkedStatus+1))), "0123456789abcdef"); !ok || m.Status != nil {
		t.Errorf("a status past MaxMarkedStatus: %v, %d bytes carried; want none", ok, len(m.Status))
	}
	for _, bad := range []string{"7:sealed:***", "7:sealedx", "7:other", "1000", ":sealed"} {
		if _, ok := ParseEndMarker([]byte("\x1b_airlock-end:0123456789abcdef:"+bad+"\x1b\\"), "0123456789abcdef"); ok {
			t.Errorf("the marker body %q parsed", bad)
		}
	}
	if _, ok := ParseEndMarker([]byte(EndMarker("another", 3)), "0123456789abcdef"); ok {
		t.Errorf("a marker with another nonce parsed")
	}
}

// TestNoEndMarker: without one (up, run --wait), nothing is added to the
// output; with one, when every daemon stopped at once, neither: the
// supervisor's exit ends the run as soon.
func TestNoEndMarker(t *testing.T) {
	t.Parallel()
	for _, marker := range []string{"", "0123456789abcdef"} {
		s := newSandbox(t)
		s.spec.EndMarker = marker
		s.daemon("quick", sh("exec sleep 100"))
		s.spec.Main.Argv = sh("echo out; echo err >&2")
		r := s.run()
		if r.code != 0 || r.stdout != "out\n" || strings.Contains(r.stderr, "airlock-end") || !strings.Contains(r.stderr, "✔ daemon quick: shut down") {
			t.Errorf("end marker %q: code %d, stdout %q, stderr %q", marker, r.code, r.stdout, r.stderr)
		}
	}
}

// TestStripEndMarkers: what quotes a container's output drops the markers,
// whole, of any nonce, sealed or not, and one cut short.
func TestStripEndMarkers(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain\n", "plain\n"},
		{"out\n" + EndMarker("ab12", 3) + "err\n", "out\nerr\n"},
		{"a" + SealedEndMarker("cd34", 0, []byte("{\"kind\":\"x\"}\n")) + "b" + EndMarker("ef", 1) + "c", "abc"},
		{"last " + EndMarkerStart("ab12") + "5:sea", "last "},
	} {
		if got := StripEndMarkers(c.in); got != c.want {
			t.Errorf("StripEndMarkers(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
