package control

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// A manifest given as text has no vault: `${vault:x}` is no vault syntax but
// `${VAR:default}` (the variable vault, default x), as in every manifest; a
// ${NAME} comes from vars only, never the daemon's environment, and one that
// vars lack (without a default) is a config error naming it.
func TestResolveTextHasNoVault(t *testing.T) {
	t.Setenv("FROM_DAEMON_ENV", "daemon-value")
	s := &Service{}
	env := func(toml string, vars map[string]string) (map[string]any, error) {
		w, values, err := s.resolveText(&ManifestText{TOML: "[sandbox]\nimage = \"x\"\n\n[env]\n" + toml, ProjectDir: t.TempDir(), Vars: vars})
		if err != nil {
			return nil, err
		}
		var m struct{ Env map[string]any }
		if err := json.Unmarshal(w.Resolved, &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range values {
			if name, ok := strings.CutPrefix(k, "env."); ok {
				m.Env[name] = v
			}
		}
		return m.Env, nil
	}
	got, err := env("T = \"${vault:x}\"\n", nil)
	if err != nil || got["T"] != "x" {
		t.Errorf("${vault:x}: %v %v, want x (the default of the variable vault)", got, err)
	}
	got, err = env("T = \"${vault:x}\"\n", map[string]string{"vault": "from-vars"})
	if err != nil || got["T"] != "from-vars" {
		t.Errorf("${vault:x} with vars.vault: %v %v, want from-vars", got, err)
	}
	got, err = env("T = \"${TOKEN}\"\n", map[string]string{"TOKEN": "tok-value"})
	if err != nil || got["T"] != "tok-value" {
		t.Errorf("${TOKEN} from vars: %v %v", got, err)
	}
	if _, err := env("T = \"${FROM_DAEMON_ENV}\"\n", nil); err == nil || !strings.Contains(err.Error(), "env.T") || !strings.Contains(err.Error(), "FROM_DAEMON_ENV") || strings.Contains(err.Error(), "daemon-value") {
		t.Errorf("${FROM_DAEMON_ENV} not in vars: %v, want a config error naming env.T and the variable", err)
	}
	// docs/api.md says the same.
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "`T = \"${vault:x}\"` gives `x`") || strings.Contains(string(doc), "`${vault:…}` is a config\nerror") {
		t.Errorf("docs/api.md does not say that ${vault:x} in manifest_toml is the variable vault's default")
	}
	if reasonOf(func() error { _, err := env("T = \"${MISSING}\"\n", nil); return err }()) != "config_error" {
		t.Errorf("a variable vars lack is not a config_error")
	}
}
