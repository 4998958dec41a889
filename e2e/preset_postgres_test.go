//go:build projects

package e2e

import (
	"strings"
	"testing"
	"time"
)

// The postgres preset honours the official image's conventions (POSTGRES_USER,
// POSTGRES_PASSWORD, POSTGRES_DB, init scripts from /docker-entrypoint-initdb.d,
// mounted from the project), so a project adds its init SQL instead of replacing
// the daemon's command.

const postgresInitManifest = `
presets = ["postgres"]

[sandbox]
image = "{{postgres}}"
network = "none"

[daemons.postgres.env]
POSTGRES_USER = "app"
POSTGRES_PASSWORD = "s3cret-pw"
POSTGRES_DB = "shop"

[mounts.initdb]
source = "db/init"
target = "/docker-entrypoint-initdb.d"
read_only = true
`

// TestPresetPostgresInitScripts: user, password and database from sandbox.toml,
// init scripts (.sql, a .sh that is not executable, in name order; a README
// ignored) from the project: the main command queries what they made at once,
// with the password over TCP, through the DATABASE_URL that follows the
// daemon's variables. A wrong password is refused. Three runs in a row, each a
// fresh sandbox whose first start runs the scripts again.
func TestPresetPostgresInitScripts(t *testing.T) {
	limit(t)
	image := debianImage(t, postgresImage, "postgresql")
	e := newEnv(t, strings.ReplaceAll(postgresInitManifest, "{{postgres}}", image))
	e.WriteFile("db/init/01-schema.sql", "create table items (id int primary key, name text not null);\ninsert into items values (1, 'one');\n")
	e.WriteFile("db/init/02-seed.sh", `psql -v ON_ERROR_STOP=1 -q -c "insert into items values (2, '$POSTGRES_USER in $POSTGRES_DB')"`+"\n")
	e.WriteFile("db/init/03-after.sql", "insert into items select 3, name || ' again' from items where id = 2;\n")
	e.WriteFile("db/init/README.md", "not a script\n")
	script := `set -e
echo "$DATABASE_URL"
psql "$DATABASE_URL" -tAc 'select id, name from items order by id'
psql -tAc 'select current_user, current_database()'
if PGPASSWORD=wrong psql -h 127.0.0.1 -U app -d shop -tAc 'select 1' 2>/tmp/err; then echo "a wrong password was accepted"; exit 1; fi
grep -o 'password authentication failed' /tmp/err`
	want := "postgres://app:s3cret-pw@127.0.0.1:5432/shop?sslmode=disable\n" +
		"1|one\n2|app in shop\n3|app in shop again\n" +
		"app|shop\n" +
		"password authentication failed\n"
	for i := 1; i <= 3; i++ {
		r := e.Run("run", "--", "sh", "-c", script)
		if r.Code != 0 || r.Stdout != want {
			t.Fatalf("run %d: want exit 0 and\n%s\ngot %s", i, want, r)
		}
	}
	e.assertClean()
}

// TestPresetPostgresInitScriptFails: an init script that fails fails the
// sandbox (125) with the script's error, and every launch starts over from an
// empty cluster rather than serving what a half-run init left behind.
func TestPresetPostgresInitScriptFails(t *testing.T) {
	limit(t)
	image := debianImage(t, postgresImage, "postgresql")
	// The three launches, each an initdb, end the start, not the ready
	// timeouts (the preset's 60 s, the sandbox's 60 s), which they came close
	// to on a loaded machine (55-71 s).
	m := strings.ReplaceAll(postgresInitManifest, "{{postgres}}", image)
	m = strings.Replace(m, "network = \"none\"\n", "network = \"none\"\nready_timeout = \"180s\"\n", 1)
	e := newEnv(t, m+`
[daemons.postgres.ready]
timeout = "180s"
`)
	e.WriteFile("db/init/01-schema.sql", "create table items (id int);\n")
	e.WriteFile("db/init/02-broken.sql", "insert into itemz values (1);\n")
	e.startFails(90*time.Second,
		"daemon postgres exited before it was ready",
		`relation "itemz" does not exist`,
		"failed the same way (exit 1) on 3 launches in a row",
		"the first start failed in /docker-entrypoint-initdb.d/02-broken.sql; the cluster was removed")
}
