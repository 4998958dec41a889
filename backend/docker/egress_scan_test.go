package docker

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/backend"
)

// TestScanDenialsSkipsLongLines: a line of the egress proxy's output longer than
// the bound (a client can make the proxy print one) is skipped, and the denials
// after it are still recorded; the last line needs no newline.
func TestScanDenialsSkipsLongLines(t *testing.T) {
	out := `{"host":"a.example","port":443,"method":"CONNECT"}` + "\n" +
		`{"host":"` + strings.Repeat("x", 3*maxDenialLine) + `","port":443}` + "\n" +
		"not json\n" +
		`{"host":"` + strings.Repeat("y", 300) + `","port":80}` + "\n" +
		`{"host":"b.example","port":80,"method":"GET"}` + "\n" +
		`{"host":"c.example","port":8080,"method":"GET"}`
	var got []string
	if err := scanDenials(strings.NewReader(out), func(d backend.EgressDenial) { got = append(got, d.Host) }); err != nil {
		t.Fatal(err)
	}
	if want := "a.example b.example c.example"; strings.Join(got, " ") != want {
		t.Errorf("denials %q, want %q", got, want)
	}
}
