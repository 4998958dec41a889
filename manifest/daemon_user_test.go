package manifest_test

import "testing"

// daemons.<name>.user (issue 13): a name, uid, name:group or uid:gid, checked
// for its form only (the name is resolved inside the sandbox); empty by default.

func TestDaemonUser(t *testing.T) {
	const daemon = img + "[daemons.db]\ncommand = [\"postgres\"]\n"
	r := load(t, map[string]string{"sandbox.toml": daemon})
	if u := r.Daemons["db"].User; u != "" {
		t.Errorf("default user %q, want \"\" (the sandbox user)", u)
	}
	if s := setting(t, r, "daemons.db.user"); s.Layer != "default" || s.Value != `""` {
		t.Errorf("config --layers: %+v", s)
	}
	for _, u := range []string{"postgres", "1000", "1000:1000", "app:staff", "app:50", "0:0", "4294967294", "svc.user", "_apt"} {
		r := load(t, map[string]string{"sandbox.toml": daemon + "user = \"" + u + "\"\n"})
		if r.Daemons["db"].User != u {
			t.Errorf("user %q decoded as %q", u, r.Daemons["db"].User)
		}
	}
	for _, u := range []string{"a:b:c", ":50", "app:", "a b", "4294967295", "99999999999", "1000:4294967296"} {
		got := loadErr(t, map[string]string{"sandbox.toml": daemon + "user = \"" + u + "\"\n"})
		want := `sandbox.toml:5: daemons.db.user: invalid user "` + u + `" (use a name, uid, name:group or uid:gid, e.g. "postgres" or "1000:1000")`
		if got != want {
			t.Errorf("user %q:\n\tgot  %s\n\twant %s", u, got, want)
		}
	}
}

// TestDaemonUserOverridesPreset: a higher layer sets a preset daemon's user
// back to "" (the sandbox user).
func TestDaemonUserOverridesPreset(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": "presets = [\"postgres\"]\n" + img + "[daemons.postgres]\nuser = \"\"\n"})
	if u := r.Daemons["postgres"].User; u != "" {
		t.Errorf("user %q, want \"\"", u)
	}
	r = load(t, map[string]string{"sandbox.toml": "presets = [\"postgres\"]\n" + img})
	if u := r.Daemons["postgres"].User; u != "postgres" {
		t.Errorf("the postgres preset's user is %q, want postgres", u)
	}
}
