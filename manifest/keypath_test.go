package manifest_test

import "testing"

// Key paths in errors and in `config --layers` quote segments that are not bare
// TOML keys, so that they can be pasted back into a manifest.

func TestKeyPathQuoting(t *testing.T) {
	tests := []struct{ name, files, want string }{
		{"dotted env name, substitution", img + "[services.db]\nimage = \"pg\"\n[services.db.env]\n\"A.B\" = \"${NOPE}\"\n",
			`sandbox.toml:6: services.db.env."A.B": NOPE is not set and not in the vault`},
		{"dotted env name, wrong type", img + "[env]\n\"A.B\" = 1\n",
			`sandbox.toml:4: env."A.B": wrong type: expected a string, got an integer`},
		{"dotted daemon name, validation", img + "[daemons.\"api.v2\"]\ncommand = [\"api\"]\nsignal = \"SIGBOGUS\"\n",
			`sandbox.toml:5: daemons."api.v2".signal: unknown signal "SIGBOGUS" (use one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL)`},
		{"dotted daemon name, unknown key", img + "[daemons.\"api.v2\"]\ncommand = [\"api\"]\nsignl = \"SIGINT\"\n",
			`sandbox.toml:5: daemons."api.v2".signl: unknown key`},
		{"dotted daemon name in a dotted key", img + "[daemons]\n\"api.v2\".command = [\"api\"]\n\"api.v2\".cwd = \"rel\"\n",
			`sandbox.toml:5: daemons."api.v2".cwd: must be an absolute path, got "rel"`},
		{"literal-quoted dotted name", img + "[mounts.'data.v1']\nsource = \"./d\"\ntarget = \"d\"\n",
			`sandbox.toml:5: mounts."data.v1".target: must be an absolute path (or start with ~/ for the sandbox user's home), got "d"`},
		{"dotted name, enabled = false undefined", img + "[services.\"db.main\"]\nenabled = false\n",
			`sandbox.toml:4: services."db.main".enabled: enabled = false, but no layer defines services."db.main" (image is missing)`},
		{"quote and backslash in a name", img + "[services.db]\nimage = \"pg\"\n[services.db.env]\n'a\"b\\c' = \"${NOPE}\"\n",
			`sandbox.toml:6: services.db.env."a\"b\\c": NOPE is not set and not in the vault`},
		{"space in a service env name", img + "[services.db]\nimage = \"pg\"\nenv = { \"MY VAR\" = \"${NOPE}\" }\n",
			`sandbox.toml:5: services.db.env."MY VAR": NOPE is not set and not in the vault`},
		{"space in a daemon env name is not a variable name", img + "[daemons.d]\ncommand = [\"d\"]\nenv = { \"MY VAR\" = \"${NOPE}\" }\n",
			`sandbox.toml:5: daemons.d.env."MY VAR": invalid variable name (use letters, digits and _, not starting with a digit)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := loadErr(t, map[string]string{"sandbox.toml": tt.files}); got != tt.want {
				t.Errorf("error:\n\tgot  %s\n\twant %s", got, tt.want)
			}
		})
	}
	t.Run("settings", func(t *testing.T) {
		r := load(t, map[string]string{"sandbox.toml": img + "[services.db.env]\n\"A.B\" = \"x\"\n[daemons.\"api.v2\"]\ncommand = [\"api\"]\n[services.db]\nimage = \"pg\"\n"})
		if s := setting(t, r, `services.db.env."A.B"`); s.Layer != "sandbox.toml:4" {
			t.Errorf(`services.db.env."A.B" from %q, want sandbox.toml:4`, s.Layer)
		}
		if s := setting(t, r, `daemons."api.v2".command`); s.Layer != "sandbox.toml:6" || s.Value != `["api"]` {
			t.Errorf(`daemons."api.v2".command = %s from %q`, s.Value, s.Layer)
		}
	})
}
