package cli

import (
	"strings"
	"testing"
)

// A bad daemon address is a usage error that names where it came from: -H
// (or --host), or the AIRLOCK_HOST variable, with the value and the forms
// that work.
func TestBadHostNamesItsSource(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		value, words string
	}{
		{"box:7878", "want unix:///path, tcp://host:port"},
		{"gopher://box", "unknown scheme \"gopher\""},
		{"tcp://box", "want tcp://host:port"},
		{"unix://", "a unix address needs a path"},
		{"ssh://box/path", "an ssh address has no path"},
	} {
		r := airlock(t, nil, "-H", tt.value, "ps")
		if r.code != ExitUsage || !strings.Contains(r.stderr, "-H "+strconvQuote(tt.value)) || strings.Contains(r.stderr, "AIRLOCK_HOST") || !strings.Contains(r.stderr, tt.words) {
			t.Errorf("-H %s: exit %d, stderr %q; want exit 2 naming -H %q and %q, not AIRLOCK_HOST", tt.value, r.code, r.stderr, tt.value, tt.words)
		}
		r = airlock(t, map[string]string{"AIRLOCK_HOST": tt.value}, "ps")
		if r.code != ExitUsage || !strings.Contains(r.stderr, "AIRLOCK_HOST="+strconvQuote(tt.value)) || !strings.Contains(r.stderr, tt.words) {
			t.Errorf("AIRLOCK_HOST=%s: exit %d, stderr %q; want exit 2 naming AIRLOCK_HOST=%q and %q", tt.value, r.code, r.stderr, tt.value, tt.words)
		}
	}
}

func strconvQuote(s string) string { return `"` + s + `"` }
