package manifest_test

import (
	"slices"
	"strings"
	"testing"
)

// One-shot daemons (daemons.<name>.oneshot): a setup step that runs once to
// completion. Its exit 0 is its readiness and it is never restarted, so a
// ready check, a restart policy or a max_restarts other than the defaults is
// a config error at the key's file and line.

func TestOneshotLoads(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": img + `[daemons.db]
command = ["postgres"]
ready = { tcp = "127.0.0.1:5432" }
[daemons.schema]
oneshot = true
command = ["psql", "-f", "/seed/schema.sql"]
after = ["db"]
user = "postgres"
restart = "always"
max_restarts = 10
[daemons.web]
command = ["web"]
after = ["schema"]
`})
	d := r.Daemons["schema"]
	if !d.Oneshot || !slices.Equal(d.After, []string{"db"}) || d.User != "postgres" {
		t.Errorf("daemons.schema = %+v", d)
	}
	if r.Daemons["db"].Oneshot || r.Daemons["web"].Oneshot {
		t.Errorf("oneshot set on a daemon that did not ask for it: %+v", r.Daemons)
	}
	if s := setting(t, r, "daemons.schema.oneshot"); s.Value != "true" || s.Layer != "sandbox.toml:7" {
		t.Errorf("config --layers: %+v", s)
	}
	// false is left out of the JSON forms (config --json, --layers, the plan
	// hash), as wait_for_daemons is: a manifest without a one-shot keeps the
	// plan hash it had, so `up` does not recreate its sandbox. The TOML form
	// shows it.
	if hasSetting(r, "daemons.web.oneshot") {
		t.Errorf("config --layers lists daemons.web.oneshot = false")
	}
	out, err := r.TOML()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "oneshot = false") || !strings.Contains(string(out), "oneshot = true") {
		t.Errorf("config (TOML) lacks the oneshot values:\n%s", out)
	}
}

func TestOneshotValidation(t *testing.T) {
	const setup = img + "[daemons.setup]\noneshot = true\ncommand = [\"setup.sh\"]\n" // daemons.setup at line 3
	const why = "a one-shot daemon is never restarted: exit 0 completes it, any other end fails the start"
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"ready", map[string]string{"sandbox.toml": setup + "ready = { cmd = [\"true\"] }\n"},
			`sandbox.toml:6: daemons.setup.ready: a one-shot daemon has no ready check: its exit 0 is its readiness (remove ready, or oneshot)`},
		{"ready table", map[string]string{"sandbox.toml": setup + "\n[daemons.setup.ready]\ntcp = \"127.0.0.1:1\"\n"},
			`sandbox.toml:7: daemons.setup.ready: a one-shot daemon has no ready check: its exit 0 is its readiness (remove ready, or oneshot)`},
		{"restart on-failure", map[string]string{"sandbox.toml": setup + "restart = \"on-failure\"\n"},
			`sandbox.toml:6: daemons.setup.restart: ` + why + ` (remove restart, or leave the default "always"; got "on-failure")`},
		{"max_restarts 0", map[string]string{"sandbox.toml": setup + "max_restarts = 0\n"},
			`sandbox.toml:6: daemons.setup.max_restarts: ` + why + ` (remove max_restarts, or leave the default 10; got 0)`},
		{"oneshot not a boolean", map[string]string{"sandbox.toml": img + "[daemons.setup]\ncommand = [\"s\"]\noneshot = \"yes\"\n"},
			`sandbox.toml:5: daemons.setup.oneshot: wrong type: expected a boolean, got a string`},
		{"oneshot in sandbox.local.toml over a daemon with a restart policy", map[string]string{
			"sandbox.toml":       img + "[daemons.setup]\ncommand = [\"s\"]\nrestart = \"on-failure\"\n",
			"sandbox.local.toml": "[daemons.setup]\noneshot = true\n"},
			`sandbox.toml:5: daemons.setup.restart: ` + why + ` (remove restart, or leave the default "always"; got "on-failure")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := loadErr(t, tt.files)
			if got != tt.want {
				t.Errorf("error:\n\tgot  %s\n\twant %s", strings.ReplaceAll(got, "\n", "\n\t     "), tt.want)
			}
		})
	}
}

// TestOneshotReportsEveryError: each key a one-shot cannot have is reported,
// with the other errors of the manifest.
func TestOneshotReportsEveryError(t *testing.T) {
	got := loadErr(t, map[string]string{"sandbox.toml": img + `[daemons.setup]
oneshot = true
command = ["setup.sh"]
restart = "on-failure"
max_restarts = 3
ready = { log = "done" }
signal = "SIGBOGUS"
`})
	wantLines(t, got,
		`sandbox.toml:6: daemons.setup.restart: a one-shot daemon is never restarted: exit 0 completes it, any other end fails the start (remove restart, or leave the default "always"; got "on-failure")`,
		`sandbox.toml:7: daemons.setup.max_restarts: a one-shot daemon is never restarted: exit 0 completes it, any other end fails the start (remove max_restarts, or leave the default 10; got 3)`,
		`sandbox.toml:8: daemons.setup.ready: a one-shot daemon has no ready check: its exit 0 is its readiness (remove ready, or oneshot)`,
		`sandbox.toml:9: daemons.setup.signal: unknown signal "SIGBOGUS" (use one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL)`,
	)
	if n := strings.Count(got, "\n") + 1; n != 4 {
		t.Errorf("got %d errors, want 4:\n%s", n, got)
	}
}
