package registryauth

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/registry"
)

const secret = "pa55-w0rd-never-printed"

// env is a getenv over a map.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeConfig(t *testing.T, dir, body string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func basic(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// decode returns the auth config a header carries.
func decode(t *testing.T, c Credentials) registry.AuthConfig {
	t.Helper()
	b, err := base64.URLEncoding.DecodeString(c.Header())
	if err != nil {
		t.Fatalf("header %q is not base64url: %v", c.Header(), err)
	}
	var a registry.AuthConfig
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// assertNoSecret fails if the credentials print the password in any way.
func assertNoSecret(t *testing.T, c Credentials) {
	t.Helper()
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		if s := fmt.Sprintf(f, c); strings.Contains(s, secret) || strings.Contains(s, c.Header()) && c.Header() != "" {
			t.Errorf("%s of the credentials prints the secret: %s", f, s)
		}
	}
	if strings.Contains(c.Warning, secret) {
		t.Errorf("warning prints the secret: %s", c.Warning)
	}
}

func TestAuths(t *testing.T) {
	t.Setenv("DOCKER_AUTH_CONFIG", "")
	home := t.TempDir()
	dir := filepath.Join(home, ".docker")
	writeConfig(t, dir, `{"auths": {
		"https://index.docker.io/v1/": {"auth": "`+basic("hubuser", secret)+`"},
		"registry.example:5000": {"auth": "`+basic("alice", secret)+`"},
		"https://ghcr.example": {"auth": "`+basic("bob", secret)+`"}
	}}`)
	for _, tc := range []struct {
		image, host, user, login string
	}{
		{"busybox", DockerHub, "hubuser", "docker login"},
		{"docker.io/library/busybox:1", DockerHub, "hubuser", "docker login"},
		{"index.docker.io/someone/tool@sha256:" + strings.Repeat("a", 64), DockerHub, "hubuser", "docker login"},
		{"registry.example:5000/team/app:v1", "registry.example:5000", "alice", "docker login registry.example:5000"},
		// A key written as a URL matches the host, as for the CLI.
		{"ghcr.example/team/app", "ghcr.example", "bob", "docker login ghcr.example"},
		{"other.example/app", "other.example", "", "docker login other.example"},
	} {
		c, err := For(tc.image, env(map[string]string{"HOME": home}))
		if err != nil {
			t.Fatalf("For(%s): %v", tc.image, err)
		}
		assertNoSecret(t, c)
		a := decode(t, c)
		if c.Host != tc.host || a.Username != tc.user || c.Login() != tc.login || c.Found() != (tc.user != "") {
			t.Errorf("For(%s) = %v user %q login %q, want host %s user %q login %q", tc.image, c, a.Username, c.Login(), tc.host, tc.user, tc.login)
		}
		if tc.user != "" && (a.Password != secret || c.Source != filepath.Join(dir, "config.json")) {
			t.Errorf("For(%s): password %v, source %q", tc.image, a.Password == secret, c.Source)
		}
		if c.Where() != filepath.Join(dir, "config.json") {
			t.Errorf("For(%s) looked in %s", tc.image, c.Where())
		}
	}

	// DOCKER_CONFIG replaces ~/.docker.
	other := t.TempDir()
	c, err := For("registry.example:5000/team/app", env(map[string]string{"HOME": home, "DOCKER_CONFIG": other}))
	if err != nil || c.Found() || c.Config != filepath.Join(other, "config.json") {
		t.Errorf("with DOCKER_CONFIG: %v, %v (config %s)", c, err, c.Config)
	}
	if a := decode(t, c); a != (registry.AuthConfig{}) {
		t.Errorf("no credentials encode as %+v, want {}", a)
	}
}

func TestBadInput(t *testing.T) {
	home := t.TempDir()
	writeConfig(t, filepath.Join(home, ".docker"), `{"auths": `)
	if _, err := For("registry.example/app", env(map[string]string{"HOME": home})); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("a broken config.json gives %v, want an error naming it", err)
	}
	if _, err := For("Not A Reference", env(map[string]string{"HOME": home})); err == nil || !strings.Contains(err.Error(), "Not A Reference") {
		t.Errorf("a bad reference gives %v", err)
	}
}

// helperScript is a credential helper answering get for one server; any
// other server is "not found", and "fail.example" makes it fail noisily.
const helperScript = `#!/bin/sh
[ "$1" = get ] || exit 1
server=$(cat)
case "$server" in
%s) printf '{"ServerURL":"%%s","Username":"carol","Secret":"%s"}' "$server" ;;
fail.example) printf '{"Username":"carol","Secret":"%s"}'; exit 1 ;;
*) echo "credentials not found in native keychain"; exit 1 ;;
esac
`

// installHelper puts docker-credential-NAME on PATH (this process's: helpers run as the CLI runs them).
func installHelper(t *testing.T, name, server string) {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-"+name), fmt.Appendf(nil, helperScript, server, secret, secret), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func TestCredentialHelpers(t *testing.T) {
	t.Setenv("DOCKER_AUTH_CONFIG", "")
	installHelper(t, "airlocktest", "registry.example")
	dir := t.TempDir()
	getenv := env(map[string]string{"DOCKER_CONFIG": dir})

	// credHelpers for one registry; auths of it are ignored, as by the CLI.
	writeConfig(t, dir, `{"auths": {"registry.example": {"auth": "`+basic("alice", "not-this")+`"}},
		"credHelpers": {"registry.example": "airlocktest", "fail.example": "airlocktest", "missing.example": "nosuchhelper"}}`)
	c, err := For("registry.example/team/app:v1", getenv)
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, c)
	if a := decode(t, c); a.Username != "carol" || a.Password != secret || c.Source != "credential helper docker-credential-airlocktest" {
		t.Errorf("credHelpers: user %q, source %q", a.Username, c.Source)
	}
	// Not found: no credentials, no warning.
	installHelper(t, "airlocktest2", "elsewhere.example")
	writeConfig(t, dir, `{"credsStore": "airlocktest2"}`)
	c, err = For("registry.example/team/app:v1", getenv)
	if err != nil || c.Found() || c.Warning != "" || c.Where() != "credential helper docker-credential-airlocktest2" {
		t.Errorf("credsStore without the server: %v, %v, warning %q", c, err, c.Warning)
	}
	// credsStore serves every registry.
	c, err = For("elsewhere.example/app", getenv)
	if a := decode(t, c); err != nil || a.Password != secret || c.Source != "credential helper docker-credential-airlocktest2" {
		t.Errorf("credsStore: %v, %v", c, err)
	}

	// A helper that fails or is missing: no credentials and a warning without the secret.
	writeConfig(t, dir, `{"credHelpers": {"fail.example": "airlocktest", "missing.example": "nosuchhelper"}}`)
	for _, image := range []string{"fail.example/app", "missing.example/app"} {
		c, err := For(image, getenv)
		if err != nil || c.Found() || c.Warning == "" {
			t.Errorf("For(%s) = %v, %v, warning %q; want no credentials and a warning", image, c, err, c.Warning)
		}
		t.Logf("%s: %s", image, c.Warning)
		assertNoSecret(t, c)
	}
}

// TestGiven: credentials another process found (the CLI, for the daemon's
// pull) are sent as given and print no secret; given without a source they
// are said to come from the request.
func TestGiven(t *testing.T) {
	a := registry.AuthConfig{Username: "alice", Password: secret, ServerAddress: "registry.example:5000"}
	c, err := Given("registry.example:5000/team/app:1", a, "/home/alice/.docker/config.json", "/home/alice/.docker/config.json", "")
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, c)
	if got := decode(t, c); got != a || c.AuthConfig() != a || c.Host != "registry.example:5000" || !c.Found() || c.Where() != "/home/alice/.docker/config.json" {
		t.Errorf("Given = %v (where %s), sends %v", c, c.Where(), got == a)
	}
	c, err = Given("busybox", registry.AuthConfig{Username: "bob", Password: secret}, "", "", "")
	if err != nil || c.Source != "the request" || c.Host != DockerHub || c.Login() != "docker login" {
		t.Errorf("Given without a source = %v, %v", c, err)
	}
	c, err = Given("busybox", registry.AuthConfig{}, "", "", "helper gone")
	if err != nil || c.Found() || c.Warning != "helper gone" || c.Where() != "the request" {
		t.Errorf("Given with nothing = %v (where %s), %v", c, c.Where(), err)
	}
	if _, err := Given("Not A Reference", a, "", "", ""); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("Given of a bad reference: %v", err)
	}
}
