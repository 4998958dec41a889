package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hostsTable is sdk/testdata/hosts.json: the cases of the rule every client
// of the daemon follows for an address; the Python SDK's tests read it too.
type hostsTable struct {
	Cases []struct {
		Address       string            `json:"address"`
		Env           map[string]string `json:"env"`
		Error         bool              `json:"error"`
		ErrorContains []string          `json:"error_contains"`
		Want          struct {
			Transport string   `json:"transport"`
			Path      string   `json:"path"`
			Addr      string   `json:"addr"`
			TLS       bool     `json:"tls"`
			CA        string   `json:"ca"`
			Token     string   `json:"token"`
			Argv      []string `json:"argv"`
		} `json:"want"`
	} `json:"cases"`
}

// TestHostsTable: -H and AIRLOCK_HOST resolve as the shared table says (the
// transport, TLS, the CA, the token), and the CLI makes a client of each
// address it accepts.
func TestHostsTable(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "sdk", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "hosts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table hostsTable
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatalf("hosts.json: %v", err)
	}
	if len(table.Cases) < 10 {
		t.Fatalf("hosts.json has %d cases", len(table.Cases))
	}
	expand := func(s string) string { return strings.ReplaceAll(s, "$TESTDATA", dir) }
	for _, c := range table.Cases {
		env := map[string]string{}
		for k, v := range c.Env {
			env[k] = expand(v)
		}
		a := &app{getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
		got, err := resolveHost(c.Address, a.getenv)
		if c.Error {
			if err == nil {
				t.Errorf("%q %v: accepted (%+v), want an error", c.Address, c.Env, got)
				continue
			}
			for _, w := range c.ErrorContains {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q: error %q does not say %q", c.Address, err, w)
				}
			}
			if _, err := a.remoteClient(c.Address); err == nil {
				t.Errorf("%q: remoteClient accepted it", c.Address)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q %v: %v", c.Address, c.Env, err)
			continue
		}
		w := c.Want
		if got.transport != w.Transport || got.path != w.Path || got.addr != w.Addr || got.tls != w.TLS ||
			got.ca != expand(w.CA) || got.token != w.Token || !slices.Equal(got.argv, w.Argv) {
			t.Errorf("%q %v:\n got %+v\nwant %+v", c.Address, c.Env, got, w)
		}
		if _, err := a.remoteClient(c.Address); err != nil {
			t.Errorf("%q: remoteClient: %v", c.Address, err)
		}
	}
}
