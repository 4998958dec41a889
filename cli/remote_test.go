package cli

import (
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
		{"unix://", "a unix address needs"},
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

// A TLS listener reached the wrong way: the error names the fix, https:// for
// a TLS port given as tcp://, AIRLOCK_TLS_CA for a certificate of an
// authority the system does not know.
func TestTLSErrorsNameTheFix(t *testing.T) {
	t.Parallel()
	quiet := log.New(io.Discard, "", 0)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ErrorLog = quiet
	srv.StartTLS()
	defer srv.Close()
	hostport := strings.TrimPrefix(srv.URL, "https://")
	r := airlock(t, map[string]string{"AIRLOCK_TOKEN": "t"}, "-H", "tcp://"+hostport, "ps")
	if r.code != ExitAirlock || !strings.Contains(r.stderr, "https://"+hostport) || !strings.Contains(r.stderr, "TLS") {
		t.Errorf("tcp:// to a TLS port: exit %d, stderr %q; want 125 naming https://%s", r.code, r.stderr, hostport)
	}
	r = airlock(t, map[string]string{"AIRLOCK_TOKEN": "t"}, "-H", "https://"+hostport, "ps")
	if r.code != ExitAirlock || !strings.Contains(r.stderr, "AIRLOCK_TLS_CA") {
		t.Errorf("https:// to a certificate of an unknown authority: exit %d, stderr %q; want 125 naming AIRLOCK_TLS_CA", r.code, r.stderr)
	}
	// Trusted, but not for the name used: the certificate must name it.
	ca := filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	_, port, _ := strings.Cut(hostport, ":")
	r = airlock(t, map[string]string{"AIRLOCK_TOKEN": "t", "AIRLOCK_TLS_CA": ca}, "-H", "https://localhost:"+port, "ps")
	if r.code != ExitAirlock || !strings.Contains(r.stderr, "subjectAltName") || !strings.Contains(r.stderr, "docs/daemon.md") {
		t.Errorf("https:// to a certificate that does not name the host: exit %d, stderr %q; want 125 naming subjectAltName", r.code, r.stderr)
	}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer plain.Close()
	hostport = strings.TrimPrefix(plain.URL, "http://")
	r = airlock(t, map[string]string{"AIRLOCK_TOKEN": "t"}, "-H", "https://"+hostport, "ps")
	if r.code != ExitAirlock || !strings.Contains(r.stderr, "tcp://"+hostport) {
		t.Errorf("https:// to a plain port: exit %d, stderr %q; want 125 naming tcp://%s", r.code, r.stderr, hostport)
	}
}
