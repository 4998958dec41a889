package manifest_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

// TestRedactedPieces: a substituted value that mixes a secret variable's
// value with other text (image = "registry/${TOKEN}") brings that value on its
// own too, by PieceKey, so that it is masked where an error quotes the field in
// parts (an Engine's pull error quotes the image in its registry's URL); a value that is one variable whole, and the host's values (the
// user's own, shown by `airlock config`), bring none. The pieces never change
// what the wire round trip gives back.
func TestRedactedPieces(t *testing.T) {
	const token, pw, home = "vault-t0ken", "vault-passw0rd", "/home/someone"
	p := newProject(t, map[string]string{"sandbox.toml": `
[sandbox]
image = "registry.example/${TEAM}:latest"

[env]
WHOLE = "${TOKEN}"
AUTH = "Bearer ${TOKEN}"
GOPATH = "${HOME_DIR}/go"
DB = "${daemons.db.env.URL}"

[mounts.cache]
source = "${HOME_DIR}/cache"
target = "/cache"

[daemons.db]
command = ["sh", "-c", "sleep 1000"]
[daemons.db.env]
URL = "postgres://app:${PW}@localhost/app"
`})
	p.env["HOME_DIR"] = home
	p.env["TEAM"] = "team-a"
	p.vault.values["TOKEN"] = token
	p.vault.values["PW"] = pw
	r := p.mustLoad()

	w, values, err := r.ToWire()
	if err != nil {
		t.Fatal(err)
	}
	pieces := map[string]string{}
	for k, v := range values {
		if _, ok := manifest.PieceField(k); ok {
			pieces[k] = v
		}
	}
	want := map[string]string{
		"env.AUTH.${TOKEN}":        token,
		"daemons.db.env.URL.${PW}": pw,
		"env.DB.${PW}":             pw, // through the daemon's variable it names
	}
	if !reflect.DeepEqual(pieces, want) {
		t.Errorf("pieces = %v\nwant %v", pieces, want)
	}
	if values["sandbox.image"] != "registry.example/team-a:latest" || values["env.GOPATH"] != home+"/go" {
		t.Errorf("the whole values: %v", values)
	}

	b, _ := json.Marshal(w)
	var got manifest.Wire
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	back, err := manifest.FromWire(got, values)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Manifest, r.Manifest) {
		t.Errorf("FromWire(ToWire()) differs:\n got %+v\nwant %+v", back.Manifest, r.Manifest)
	}

	// An API caller's values are its secrets, wherever they are.
	l := p.loader()
	l.SecretEnv = true
	r, err = l.Load(r.File)
	if err != nil {
		t.Fatal(err)
	}
	_, values = r.Redacted()
	if values["sandbox.image.${TEAM}"] != "team-a" || values["env.GOPATH.${HOME_DIR}"] != home ||
		values["mounts.cache.source.${HOME_DIR}"] != home {
		t.Errorf("with SecretEnv, the host's values in part: %v", values)
	}
}
