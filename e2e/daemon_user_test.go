package e2e

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/test/testenv"
)

// Per-daemon user (issue 13): daemons.<name>.user is resolved in the sandbox's own
// /etc/passwd and /etc/group, and the daemon runs with that uid, gid and groups.
// A user the sandbox does not have is a row of TestRunStartFails.

// TestDaemonUser: a user that exists only in the sandbox's /etc/passwd (copied in)
// runs the daemon with its uid, primary group, supplementary groups and home; a
// numeric uid:gid needs no entry. The sandbox itself stays root.
func TestDaemonUser(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"
network = "none"

[copies.passwd]
source = "./accounts/passwd"
target = "/etc/passwd"

[copies.group]
source = "./accounts/group"
target = "/etc/group"

[daemons.svc]
user = "svc"
command = ["sh", "-c", "{ grep -E '^(Uid|Gid|Groups):' /proc/self/status; echo \"HOME: $HOME\"; } > /tmp/svc.new; mv /tmp/svc.new /tmp/svc.ids; exec sleep 300"]
ready = { cmd = ["test", "-s", "/tmp/svc.ids"], timeout = "20s" }

[daemons.num]
user = "4242:4343"
command = ["sh", "-c", "{ grep -E '^(Uid|Gid|Groups):' /proc/self/status; echo \"HOME: $HOME\"; } > /tmp/num.new; mv /tmp/num.new /tmp/num.ids; exec sleep 300"]
ready = { cmd = ["test", "-s", "/tmp/num.ids"], timeout = "20s" }
`)
	e.WriteFile("accounts/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\nsvc:x:1234:1234:service:/home/svc:/bin/sh\n")
	e.WriteFile("accounts/group", "root:x:0:\nnobody:x:65534:\nsvc:x:1234:\nextra:x:2345:nobody,svc\n")
	r := e.Run("run", "--", "sh", "-c", "echo main $(id -u); cat /tmp/svc.ids /tmp/num.ids")
	want := "main 0\n" +
		"Uid:\t1234\t1234\t1234\t1234\nGid:\t1234\t1234\t1234\t1234\nGroups:\t1234 2345 \nHOME: /home/svc\n" +
		"Uid:\t4242\t4242\t4242\t4242\nGid:\t4343\t4343\t4343\t4343\nGroups:\t4343 \nHOME: /\n"
	if r.Code != 0 || r.Stdout != want {
		t.Errorf("want exit 0 and\n%s\ngot %s", want, r)
	}
	e.assertClean()
}

// TestDaemonUserNonRootSandbox: a sandbox that does not run as root runs a daemon
// as its own user (named as such: the postgres preset in a sandbox whose user is
// postgres) with PID 1 as that user too (nothing runs as root). A daemon that
// names another user (root here) makes PID 1 root instead, which runs the
// daemon as root and the main command as the sandbox user
// (TestRootStepBesideNonRootMain shows the rest).
func TestDaemonUserNonRootSandbox(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"
network = "none"
user = "nobody"

[daemons.same]
user = "nobody"
command = ["sh", "-c", "id -u > /tmp/same.new; mv /tmp/same.new /tmp/same.id; exec sleep 300"]
ready = { cmd = ["test", "-s", "/tmp/same.id"], timeout = "20s" }
`)
	// --wait: the manifest is edited right after; a run that returned while
	// its daemon still stopped would count that edit as the sandbox's (docs/trust.md).
	// PID 1's uid is in /proc/1/status.
	r := e.Run("run", "--wait", "--", "sh", "-c", "cat /tmp/same.id; grep '^Uid:' /proc/1/status")
	if want := "65534\nUid:\t65534\t65534\t65534\t65534\n"; r.Code != 0 || r.Stdout != want {
		t.Errorf("want exit 0 and %q, got %s", want, r)
	}
	e.WriteManifest(`
[sandbox]
image = "{{image}}"
network = "none"
user = "nobody"

[daemons.other]
user = "root"
command = ["sh", "-c", "id -u > /tmp/other.new; mv /tmp/other.new /tmp/other.id; exec sleep 300"]
ready = { cmd = ["test", "-s", "/tmp/other.id"], timeout = "20s" }
`)
	r = e.Run("run", "--wait", "--", "sh", "-c", "echo main $(id -u); echo other $(cat /tmp/other.id); grep '^Uid:' /proc/1/status")
	if want := "main 65534\nother 0\nUid:\t0\t0\t0\t0\n"; r.Code != 0 || r.Stdout != want {
		t.Errorf("want exit 0 and %q, got %s", want, r)
	}
	e.assertClean()
}

// postgresImage is a Debian bookworm image with the postgresql package, built by
// scripts/debian-image.sh when the tag is missing (about a minute, once).
const postgresImage = "airlock-test/debian-postgres:bookworm-1"

// debianImage returns tag, building it with scripts/debian-image.sh from Debian
// packages when the Engine does not have it.
func debianImage(t *testing.T, tag string, packages ...string) string {
	t.Helper()
	cli := testenv.Client(t)
	if _, err := cli.ImageInspect(context.Background(), tag); err == nil {
		return tag
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, "../scripts/debian-image.sh", append([]string{tag}, packages...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("cannot build %s: %v\n%s", tag, err, out)
	}
	t.Logf("built %s in %v", tag, time.Since(start).Round(time.Second))
	return tag
}

// TestPresetPostgresDebian: the postgres preset on a stock Debian image with
// PostgreSQL installed (binaries under /usr/lib/postgresql/<ver>/bin, not on PATH),
// as a root sandbox: initdb and postgres run as user postgres (with its groups),
// and the main command connects. And the case one-shots are for: a step after the
// preset's daemon is ready loads a schema (as the postgres user), and the main
// command uses it at once. (One sandbox for both: each start of PostgreSQL costs
// the machine seconds of CPU.)
func TestPresetPostgresDebian(t *testing.T) {
	limit(t)
	image := debianImage(t, postgresImage, "postgresql")
	e := newEnv(t, `
presets = ["postgres"]

[sandbox]
image = "`+image+`"
network = "none"

[daemons.schema]
oneshot = true
after = ["postgres"]
user = "postgres"
command = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", 'shop "north"', "-v", "ON_ERROR_STOP=1", "-c", "create table if not exists users (id int); insert into users values (7)"]

# No init scripts: the database is made without the first start's own server.
[daemons.postgres.env]
POSTGRES_DB = 'shop "north"'
`)
	script := `set -e
echo "db [$(psql -tAc 'select current_database()')]"
echo "users [$(psql -tAc 'select id from users')]"
echo "main $(id -u)"
pg_isready
psql -tAc 'select current_user'
psql -tAc 'create table t (x int); insert into t values (42); select x from t'
pid=$(head -n 1 /tmp/airlock-pgdata/postmaster.pid)
echo "server $(grep '^Uid:' /proc/$pid/status | cut -f2) groups $(grep '^Groups:' /proc/$pid/status | cut -f2)"
echo "postgres $(id -u postgres) groups $(id -G postgres) "
echo "owner $(stat -c %U /tmp/airlock-pgdata)"`
	r := e.Run("run", "--", "sh", "-c", script)
	if r.Code != 0 {
		t.Fatalf("want exit 0, got %s", r)
	}
	contains(t, "stdout", r.Stdout, "db [shop \"north\"]\n", "users [7]\n", "main 0\n", "accepting connections", "\npostgres\n", "\n42\n", "owner postgres\n")
	var server, user string
	for _, l := range strings.Split(r.Stdout, "\n") {
		if rest, ok := strings.CutPrefix(l, "server "); ok {
			server = rest
		}
		if rest, ok := strings.CutPrefix(l, "postgres "); ok {
			user = rest
		}
	}
	// "100 groups 101 102 " from /proc against "100 groups 102 101 " from id: same sets.
	if sortFields(server) != sortFields(user) || server == "" {
		t.Errorf("the server runs as %q, want the postgres user %q\n%s", server, user, r)
	}
	e.assertClean()
}

// sortFields sorts the fields after the first two ("UID groups G…").
func sortFields(s string) string {
	f := strings.Fields(s)
	if len(f) > 2 {
		slices.Sort(f[2:])
	}
	return strings.Join(f, " ")
}

// redisImage is a Debian bookworm image with redis-server, redis-tools and make
// (the image scripts/bench-redis.sh builds, by the same recipe).
const redisImage = "airlock-bench/debian-redis:bookworm-1"

// TestPresetRedisDebian: the redis preset's ready check is a PING answered by
// PONG (issue 24: readiness that means serving), so a main command that uses
// the server at once is served, every time.
func TestPresetRedisDebian(t *testing.T) {
	limit(t)
	image := debianImage(t, redisImage, "redis-server", "redis-tools", "make")
	e := newEnv(t, `
presets = ["redis"]

[sandbox]
image = "`+image+`"
network = "none"
`)
	for i := 0; i < 3; i++ {
		r := e.Run("run", "--", "sh", "-c", `redis-cli -u "$REDIS_URL" ping && redis-cli -u "$REDIS_URL" set k v && redis-cli -u "$REDIS_URL" get k`)
		if r.Code != 0 || r.Stdout != "PONG\nOK\nv\n" {
			t.Fatalf("run %d: %s", i+1, r)
		}
	}
	r := e.Run("config", "--layers")
	contains(t, "config --layers", r.Stdout, `daemons.redis.ready.send = "PING\r\n"`, `daemons.redis.ready.expect = "+PONG"`)
	e.assertClean()
}
