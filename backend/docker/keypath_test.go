package docker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/supervisor"
)

// Unit tests (no Engine): the runtime finds substituted values by the key paths
// the manifest records, and a spec built from any valid manifest is one the
// supervisor accepts.

type mapVault map[string]string

func (v mapVault) Lookup(name string) (string, bool, error) {
	val, ok := v[name]
	return val, ok, nil
}

func loadBytes(t *testing.T, toml string, vault map[string]string) *manifest.Resolved {
	t.Helper()
	l := &manifest.Loader{Getenv: func(string) (string, bool) { return "", false }, Vault: mapVault(vault)}
	r, err := l.LoadBytes("sandbox.toml", t.TempDir(), []byte(toml))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return r
}

// TestSecretKeysAgreeWithManifest: a service env name that needs quoting (a
// non-breaking space, a control character, a dot) and holds a vault value is
// delivered privately, never written into the container's configuration.
func TestSecretKeysAgreeWithManifest(t *testing.T) {
	const secret = "vault-value-not-in-config"
	names := []string{"my.var", "MY VAR", "A\u00a0B", "C\x01D", "tab\tname", "q\"b\\s", "line\u2028sep"}
	var b strings.Builder
	b.WriteString("[sandbox]\nimage = \"x\"\n[env]\nTOKEN = \"${SECRET}\"\n[daemons.d]\ncommand = [\"d\"]\nenv = { P = \"${SECRET}\" }\n[services.db]\nimage = \"pg\"\n[services.db.env]\nPLAIN = \"literal\"\n")
	for _, n := range names {
		b.WriteString(manifest.KeyPath(n) + " = \"${SECRET}\"\n")
	}
	r := loadBytes(t, b.String(), map[string]string{"SECRET": secret})

	secretEnv := backend.ServiceSecretEnv("db", r)
	for _, n := range names {
		if key, ok := secretEnv[n]; !ok || r.Sources[key] != manifest.Vault {
			t.Errorf("service env %q: key %q (%v), not found as a secret", n, key, ok)
		}
	}
	cfg, err := serviceConfig("db", r.Services["db"], nil, secretEnv, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range cfg.Env {
		if strings.Contains(kv, secret) {
			t.Errorf("the service's container config holds a vault value: %q", kv)
		}
	}
	if len(cfg.Env) != 1 || cfg.Env[0] != "PLAIN=literal" {
		t.Errorf("service Config.Env = %q, want only the literal", cfg.Env)
	}

	// The primary's spec names the key paths, the values go by key path.
	spec := backend.BuildSpec(&backend.Request{Command: []string{"sh"}}, r)
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) {
		t.Errorf("the spec holds a vault value: %s", data)
	}
	values := backend.DeliveredValues(&backend.Request{}, r)
	for _, e := range append(spec.Main.Env, spec.Daemons[0].Env...) {
		if e.Secret == "" || values[e.Secret] != secret {
			t.Errorf("spec entry %+v: no delivered value under its key (values: %v)", e, keys(values))
		}
	}
	if _, err := supervisor.ParseSpec(data); err != nil {
		t.Errorf("the supervisor refuses the spec: %v", err)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSpecAtTheBounds: a manifest at the edge of every bound validation
// accepts gives a spec that the supervisor accepts too.
func TestSpecAtTheBounds(t *testing.T) {
	name := strings.Repeat("d", manifest.MaxNameLength)
	r := loadBytes(t, `[sandbox]
image = "x"
cpus = 1024
memory = "1024t"
ready_timeout = "8760h"
[env]
_A1 = "x"
[daemons.`+name+`]
command = ["d"]
timeout = 31536000
max_restarts = 10000
ready = { log = "x", timeout = "8760h" }
env = { Z_9 = "${SECRET}" }
[daemons.e]
command = ["e"]
timeout = 0
max_restarts = 0
after = ["`+name+`"]
ready = { tcp = "localhost:65535", timeout = "1ns" }
`, map[string]string{"SECRET": "s"})
	data, err := json.Marshal(backend.BuildSpec(&backend.Request{Command: []string{"sh"}}, r))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := supervisor.ParseSpec(data); err != nil {
		t.Errorf("the supervisor refuses a spec made from a valid manifest: %v\n%s", err, data)
	}
	if got, want := backend.StopSeconds(r), manifest.MaxDaemonTimeout+5; got != want {
		t.Errorf("stopSeconds = %d, want %d", got, want)
	}
	if manifest.MaxDaemonTimeout != supervisor.MaxTimeout || manifest.MaxCount != supervisor.MaxRestarts || manifest.MaxDuration != supervisor.MaxReadyTimeout {
		t.Errorf("bounds differ: manifest %d s, %d restarts, %v; supervisor %d s, %d restarts, %v",
			manifest.MaxDaemonTimeout, manifest.MaxCount, manifest.MaxDuration, supervisor.MaxTimeout, supervisor.MaxRestarts, supervisor.MaxReadyTimeout)
	}
}

// TestStopSecondsBounded: a daemon timeout no validation saw (a record of an
// older daemon) cannot make the Engine's stop timeout wrap around.
func TestStopSecondsBounded(t *testing.T) {
	for _, timeout := range []int{1<<63 - 1, manifest.MaxDaemonTimeout + 1, -5} {
		r := &manifest.Resolved{Manifest: manifest.Manifest{Daemons: map[string]manifest.Daemon{"d": {Timeout: timeout}}}}
		got := backend.StopSeconds(r)
		if got < 5 || got > manifest.MaxDaemonTimeout+5 {
			t.Errorf("timeout %d: stopSeconds = %d", timeout, got)
		}
	}
	r := &manifest.Resolved{Manifest: manifest.Manifest{Daemons: map[string]manifest.Daemon{"a": {Timeout: 0}, "b": {Timeout: 20}}}}
	if got := backend.StopSeconds(r); got != 3605 {
		t.Errorf("stopSeconds with a daemon that waits forever = %d, want 3605", got)
	}
}
