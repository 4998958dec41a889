package manifest_test

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

// In [env], ${daemons.<name>.env.<VAR>} and ${services.<name>.env.<VAR>} take
// the value of a daemon's or a service's variable after the layers merged and
// after its own substitution, so a preset's DATABASE_URL follows the user and
// password a project gives the daemon (the postgres preset issue).

const refsPreset = `
[env]
URL = "db://${daemons.db.env.USER:-nobody}:${daemons.db.env.PASSWORD:}@127.0.0.1/${daemons.db.env.DB:-${daemons.db.env.USER:-nobody}}"
SVC = "${services.cache.env.\"odd.name\":-none}"
[daemons.db]
command = ["db"]
env = { USER = "postgres", PASSWORD = "" }
[services.cache]
image = "redis:7"
env = { "odd.name" = "x" }
`

func TestEnvRefs(t *testing.T) {
	files := map[string]string{"p.toml": refsPreset, "sandbox.toml": "presets = [\"./p.toml\"]\n" + img}
	r := load(t, files)
	if got, want := r.Env["URL"], "db://postgres:@127.0.0.1/postgres"; got != want {
		t.Errorf("env.URL = %q, want %q", got, want)
	}
	if got := r.Env["SVC"]; got != "x" {
		t.Errorf("env.SVC = %q, want x", got)
	}
	if src, ok := r.Sources["env.URL"]; ok {
		t.Errorf("env.URL named literals only, yet its source is %v", src)
	}

	// The project sets the daemon's variables; [env] follows.
	files["sandbox.toml"] += "[daemons.db.env]\nUSER = \"app\"\nPASSWORD = \"pw\"\nDB = \"appdb\"\n"
	if got, want := load(t, files).Env["URL"], "db://app:pw@127.0.0.1/appdb"; got != want {
		t.Errorf("env.URL = %q, want %q", got, want)
	}

	// A variable removed, or its daemon turned off: the default.
	files["sandbox.toml"] = "presets = [\"./p.toml\"]\n" + img + "[daemons.db.env]\nUSER = false\n[services.cache]\nenabled = false\n"
	r = load(t, files)
	if got, want := r.Env["URL"], "db://nobody:@127.0.0.1/nobody"; got != want || r.Env["SVC"] != "none" {
		t.Errorf("env.URL = %q, want %q; env.SVC = %q, want none", got, want, r.Env["SVC"])
	}
}

// TestEnvRefsSources: a value that names a daemon's variable taken from the host
// environment or the vault comes from there too: masked by config, carried
// privately, and a vault value's names follow it.
func TestEnvRefsSources(t *testing.T) {
	p := newProject(t, map[string]string{"sandbox.toml": img + `
[env]
URL = "db://${daemons.db.env.USER}:${daemons.db.env.PASSWORD}@h"
USER_ONLY = "${daemons.db.env.USER}"
[daemons.db]
command = ["db"]
env = { USER = "${DB_USER}", PASSWORD = "${DB_PASS}" }
`})
	p.env["DB_USER"] = "app"
	p.vault.values["DB_PASS"] = "s3cret"
	r := p.mustLoad()
	if r.Env["URL"] != "db://app:s3cret@h" {
		t.Errorf("env.URL = %q", r.Env["URL"])
	}
	if r.Sources["env.URL"] != manifest.Vault || r.Sources["env.USER_ONLY"] != manifest.Host {
		t.Errorf("sources: env.URL %v (want vault), env.USER_ONLY %v (want host)", r.Sources["env.URL"], r.Sources["env.USER_ONLY"])
	}
	if m := r.Masked(); m.Env["URL"] != manifest.Mask || m.Env["USER_ONLY"] != "app" {
		t.Errorf("masked env = %v", m.Env)
	}
	out, _ := r.TOML()
	if strings.Contains(string(out), "s3cret") {
		t.Errorf("config shows the vault value:\n%s", out)
	}
}

// TestEnvRefsErrors: a reference to a variable no layer sets, without a
// default, is a config error at the [env] key; a reference anywhere but [env]
// is refused (daemons and services cannot name each other: no order, no cycles).
func TestEnvRefsErrors(t *testing.T) {
	const daemon = "[daemons.db]\ncommand = [\"db\"]\nenv = { USER = \"app\" }\n"
	for _, c := range []struct{ manifest, want string }{
		{img + "[env]\nA = \"${daemons.db.env.NOPE}\"\n" + daemon,
			"sandbox.toml:4: env.A: ${daemons.db.env.NOPE}: no layer sets daemons.db.env.NOPE"},
		{img + "[env]\nA = \"${daemons.other.env.USER}\"\n" + daemon,
			"sandbox.toml:4: env.A: ${daemons.other.env.USER}: no layer sets daemons.other.env.USER"},
		{img + daemon + "[daemons.web]\ncommand = [\"web\"]\nenv = { U = \"${daemons.db.env.USER}\" }\n",
			"sandbox.toml:8: daemons.web.env.U: ${daemons.db.env.USER}: another key's value can be named in [env] only"},
		{img + daemon + "[mounts.m]\nsource = \"/x/${daemons.db.env.USER}\"\ntarget = \"/m\"\n",
			"sandbox.toml:7: mounts.m.source: ${daemons.db.env.USER}: another key's value can be named in [env] only"},
		// Not a key path of a variable: an invalid variable name, as before.
		{img + "[env]\nA = \"${daemons.db.command}\"\n" + daemon,
			`sandbox.toml:4: env.A: invalid variable name "daemons.db.command" in ${daemons.db.command}`},
	} {
		if got := loadErr(t, map[string]string{"sandbox.toml": c.manifest}); got != c.want {
			t.Errorf("%s\n\tgot  %s\n\twant %s", c.manifest, got, c.want)
		}
	}
}

// TestPresetPostgresEnvFollows: the postgres preset's [env] follows what a
// project sets in daemons.postgres.env; POSTGRES_DB defaults to the user.
func TestPresetPostgresEnvFollows(t *testing.T) {
	for _, c := range []struct {
		set                           string
		url, user, password, database string
	}{
		{"", "postgres://postgres:@127.0.0.1:5432/postgres?sslmode=disable", "postgres", "", "postgres"},
		{"POSTGRES_USER = \"app\"\n", "postgres://app:@127.0.0.1:5432/app?sslmode=disable", "app", "", "app"},
		{"POSTGRES_USER = \"app\"\nPOSTGRES_PASSWORD = \"pw\"\nPOSTGRES_DB = \"shop\"\n", "postgres://app:pw@127.0.0.1:5432/shop?sslmode=disable", "app", "pw", "shop"},
		{"POSTGRES_USER = false\nPOSTGRES_DB = false\n", "postgres://postgres:@127.0.0.1:5432/postgres?sslmode=disable", "postgres", "", "postgres"},
	} {
		r := load(t, map[string]string{"sandbox.toml": "presets = [\"postgres\"]\n" + img + "[daemons.postgres.env]\n" + c.set})
		got := []string{r.Env["DATABASE_URL"], r.Env["PGUSER"], r.Env["PGPASSWORD"], r.Env["PGDATABASE"]}
		want := []string{c.url, c.user, c.password, c.database}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("with\n%s\tgot  %q\n\twant %q", c.set, got, want)
		}
	}
}

// TestPresetMariaDBEnvFollows: the mariadb preset's DATABASE_URL names the
// user the project sets (else root) with its password (else root's) and the
// database; MYSQL_HOST and MYSQL_TCP_PORT lead the clients to the server.
func TestPresetMariaDBEnvFollows(t *testing.T) {
	for _, c := range []struct {
		set, url string
	}{
		{"", "mysql://root:@127.0.0.1:3306/"},
		{"MARIADB_ROOT_PASSWORD = \"rootpw\"\n", "mysql://root:rootpw@127.0.0.1:3306/"},
		{"MARIADB_USER = \"app\"\nMARIADB_PASSWORD = \"pw\"\nMARIADB_DATABASE = \"shop\"\nMARIADB_ROOT_PASSWORD = \"rootpw\"\n", "mysql://app:pw@127.0.0.1:3306/shop"},
		{"MARIADB_USER = false\nMARIADB_DATABASE = false\n", "mysql://root:@127.0.0.1:3306/"},
	} {
		r := load(t, map[string]string{"sandbox.toml": "presets = [\"mariadb\"]\n" + img + "[daemons.mariadb.env]\n" + c.set})
		got := []string{r.Env["DATABASE_URL"], r.Env["MYSQL_HOST"], r.Env["MYSQL_TCP_PORT"]}
		want := []string{c.url, "127.0.0.1", "3306"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("with\n%s\tgot  %q\n\twant %q", c.set, got, want)
		}
	}
}
