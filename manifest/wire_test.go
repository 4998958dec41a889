package manifest_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

// TestWireRoundTrip: a resolved manifest with values from the host environment
// and the vault goes to the wire without any of them, and comes back (through
// JSON, as the daemon receives and keeps it) the same, sources included; without
// the values it comes back masked.
func TestWireRoundTrip(t *testing.T) {
	const token, home = "vault-s3cret", "/home/someone"
	p := newProject(t, map[string]string{"sandbox.toml": img + `
[env]
TOKEN = "${TOKEN}"
WHERE = "${HOME_DIR}/x"
PLAIN = "literal"

[mounts.cache]
source = "${HOME_DIR}/cache"
target = "/cache"

[daemons.web]
command = ["sh", "-c", "sleep 1000"]
[daemons.web.env]
KEY = "${TOKEN}"
`})
	p.env["HOME_DIR"] = home
	p.vault.values["TOKEN"] = token
	r := p.mustLoad()

	w, values, err := r.ToWire()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), token) || strings.Contains(string(b), home) {
		t.Errorf("the wire form holds a substituted value:\n%s", b)
	}
	wantSources := map[string]string{"env.TOKEN": "vault", "env.WHERE": "host", "mounts.cache.source": "host", "daemons.web.env.KEY": "vault"}
	if !reflect.DeepEqual(w.Sources, wantSources) {
		t.Errorf("wire sources = %v, want %v", w.Sources, wantSources)
	}
	if values["env.TOKEN"] != token || values["env.WHERE"] != home+"/x" || len(values) != 4 {
		t.Errorf("values = %v", values)
	}

	var got manifest.Wire
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	back, err := manifest.FromWire(got, values)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Manifest, r.Manifest) || !reflect.DeepEqual(back.Sources, r.Sources) ||
		back.File != r.File || back.ProjectDir != r.ProjectDir {
		t.Errorf("FromWire(ToWire()) differs:\n got %+v\nwant %+v", back, r)
	}
	if err := back.Validate(); err != nil {
		t.Errorf("the manifest read back does not validate: %v", err)
	}

	masked, err := manifest.FromWire(got, nil)
	if err != nil {
		t.Fatal(err)
	}
	if masked.Env["TOKEN"] != manifest.Mask || masked.Env["PLAIN"] != "literal" || !reflect.DeepEqual(masked.Sources, r.Sources) {
		t.Errorf("without values: env %v, sources %v", masked.Env, masked.Sources)
	}
}

// TestFromWireRefuses: what does not decode strictly is an error, never a
// manifest silently missing a part.
func TestFromWireRefuses(t *testing.T) {
	for _, w := range []manifest.Wire{
		{Resolved: json.RawMessage(`{"sandbox":{"image":"x"},"bogus":1}`)},
		{Resolved: json.RawMessage(`{"sandbox":{"image":"x"}} {}`)},
		{Resolved: json.RawMessage(`not json`)},
		{Resolved: json.RawMessage(`{"sandbox":{"image":"x"}}`), Sources: map[string]string{"env.A": "elsewhere"}},
	} {
		if _, err := manifest.FromWire(w, nil); err == nil || !strings.HasPrefix(err.Error(), "cannot decode the manifest") {
			t.Errorf("FromWire(%s, %v) = %v, want a decoding error", w.Resolved, w.Sources, err)
		}
	}
}
