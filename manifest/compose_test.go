package manifest_test

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

// layersLine is key's line of config --layers: its value and its layer.
func layersLine(t *testing.T, r *manifest.Resolved, key string) string {
	t.Helper()
	for _, s := range r.Settings() {
		if s.Key == key {
			return s.Key + " = " + s.Value + "  # " + s.Layer
		}
	}
	t.Fatalf("no setting %s", key)
	return ""
}

// [compose]: a project's compose.yaml read where it is (issue 24), in the
// style of real projects' files: a database with an entrypoint wrapper, init
// scripts and TLS files mounted from the repository, a healthcheck with
// start_interval, a cache in a profile, a .env for interpolation.

const realCompose = `name: shop
services:
  postgres:
    image: postgres:${PG_VERSION:-16}-alpine
    entrypoint: ["/ci/pg-entrypoint.sh"]
    command: ["postgres", "-c", "ssl=on", "-c", "ssl_cert_file=/certs/server.crt"]
    environment:
      POSTGRES_USER: shop
      POSTGRES_PASSWORD: ${PG_PASSWORD}
      POSTGRES_DB: shop_test
    volumes:
      - ./ci/initdb:/docker-entrypoint-initdb.d:ro
      - ./ci/certs:/certs:ro
      - ./ci/pg-entrypoint.sh:/ci/pg-entrypoint.sh:ro
      - pgdata:/var/lib/postgresql/data
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U shop -d shop_test"]
      interval: 10s
      timeout: 5s
      retries: 5
      start_period: 20s
      start_interval: 500ms
  redis:
    image: redis:7
    profiles: [cache]
    command: redis-server --save ""
  migrate:
    image: shop-migrate:latest
    depends_on:
      postgres:
        condition: service_healthy
volumes:
  pgdata:
`

func TestComposeServices(t *testing.T) {
	p := newProject(t, map[string]string{
		"sandbox.toml": img + "[compose]\nfile = \"compose.yaml\"\n",
		"compose.yaml": realCompose,
		".env":         "PG_VERSION=15\nPG_PASSWORD=from-dotenv\n",
	})
	r, err := p.load()
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(r.Services)); !slices.Equal(got, []string{"migrate", "postgres"}) {
		t.Errorf("services %v: redis is in a profile that is not active", got)
	}
	pg := r.Services["postgres"]
	if pg.Image != "postgres:15-alpine" || pg.Env["POSTGRES_PASSWORD"] != "from-dotenv" {
		t.Errorf("interpolation from .env: image %q, password %q", pg.Image, pg.Env["POSTGRES_PASSWORD"])
	}
	if !slices.Equal(pg.Entrypoint, []string{"/ci/pg-entrypoint.sh"}) || pg.Command[0] != "postgres" {
		t.Errorf("entrypoint %v, command %v", pg.Entrypoint, pg.Command)
	}
	wantVols := []string{p.dir + "/ci/initdb:/docker-entrypoint-initdb.d:ro", p.dir + "/ci/certs:/certs:ro", p.dir + "/ci/pg-entrypoint.sh:/ci/pg-entrypoint.sh:ro", "pgdata:/var/lib/postgresql/data"}
	if !slices.Equal(pg.Volumes, wantVols) {
		t.Errorf("volumes\n\t%v, want\n\t%v", pg.Volumes, wantVols)
	}
	h := pg.Healthcheck
	if h == nil || !slices.Equal(h.Cmd, []string{"/bin/sh", "-c", "pg_isready -U shop -d shop_test"}) || h.StartInterval != "500ms" || h.StartPeriod != "20s" || h.Retries != 5 || h.Interval != "10s" {
		t.Errorf("healthcheck %+v", h)
	}
	if got := r.Services["migrate"].DependsOn; got["postgres"] != "service_healthy" {
		t.Errorf("migrate depends_on %v", got)
	}
	// config --layers names the compose file's line.
	if got := layersLine(t, r, "services.postgres.image"); !strings.HasSuffix(got, "# compose.yaml:4") {
		t.Errorf("config --layers: %q", got)
	}
	if got := layersLine(t, r, "services.postgres.env.POSTGRES_DB"); !strings.HasSuffix(got, "# compose.yaml:10") {
		t.Errorf("config --layers: %q", got)
	}
	// The host environment wins over .env, as in compose.
	l := p.loader()
	l.Environ = func() []string { return []string{"PG_PASSWORD=from-host"} }
	if r, err = l.Load(filepath.Join(p.dir, manifest.FileName)); err != nil || r.Services["postgres"].Env["POSTGRES_PASSWORD"] != "from-host" {
		t.Errorf("host over .env: %v %v", r.Services["postgres"].Env, err)
	}
}

// TestComposeOverriddenBySandboxToml: sandbox.toml's [services.<name>] lays its
// keys over the compose file's; compose.services takes a service and what it
// depends on; compose.profiles activates a profile.
func TestComposeOverriddenBySandboxToml(t *testing.T) {
	p := newProject(t, map[string]string{
		"sandbox.toml": img + "[compose]\nfile = \"compose.yaml\"\nservices = [\"migrate\"]\n[services.postgres.env]\nPOSTGRES_PASSWORD = \"${PGPASS}\"\n[services.postgres.healthcheck]\nstart_interval = \"100ms\"\n",
		"compose.yaml": realCompose,
	})
	p.env["PGPASS"] = "host-secret"
	r, err := p.load()
	if err != nil {
		t.Fatal(err)
	}
	pg := r.Services["postgres"]
	if pg.Env["POSTGRES_PASSWORD"] != "host-secret" || pg.Env["POSTGRES_USER"] != "shop" || pg.Healthcheck.StartInterval != "100ms" || pg.Healthcheck.Interval != "10s" {
		t.Errorf("postgres after the override: env %v, healthcheck %+v", pg.Env, pg.Healthcheck)
	}
	if r.Sources["services.postgres.env.POSTGRES_PASSWORD"] == 0 {
		t.Errorf("the overriding value is substituted: it must reach the service privately (sources %v)", r.Sources)
	}
	if got := slices.Sorted(maps.Keys(r.Services)); !slices.Equal(got, []string{"migrate", "postgres"}) {
		t.Errorf("services = [\"migrate\"] took %v, want migrate and what it depends on", got)
	}
	p = newProject(t, map[string]string{"sandbox.toml": img + "[compose]\nfile = \"compose.yaml\"\nprofiles = [\"cache\"]\n", "compose.yaml": realCompose})
	if r, err = p.load(); err != nil || r.Services["redis"].Image != "redis:7" || !slices.Equal(r.Services["redis"].Command, []string{"redis-server", "--save", ""}) {
		t.Errorf("profile cache: %+v %v", r.Services["redis"], err)
	}
}

// TestComposeKeysAirlockCannotHonour: every such key is an error naming it,
// the service and the compose file's line, unless compose.ignore names it.
func TestComposeKeysAirlockCannotHonour(t *testing.T) {
	compose := "services:\n  db:\n    image: postgres\n    container_name: pg\n    restart: always\n    networks:\n      back:\n        aliases: [pg]\n        ipv4_address: 10.5.0.9\n    privileged: true\nnetworks:\n  back:\n    ipam:\n      config: [{subnet: 10.5.0.0/16}]\n"
	p := newProject(t, map[string]string{"sandbox.toml": img + "[compose]\nfile = \"compose.yaml\"\n", "compose.yaml": compose})
	got := p.loadErr()
	for _, want := range []string{
		`compose.yaml:4: services.db.container_name: airlock cannot honour container_name in a sandbox's service; remove it, or add "container_name" to compose.ignore to run without it`,
		`compose.yaml:5: services.db.restart: airlock cannot honour restart`,
		`compose.yaml:9: services.db.networks.back.ipv4_address: airlock cannot honour ipv4_address`,
		`compose.yaml:10: services.db.privileged: airlock cannot honour privileged`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	p = newProject(t, map[string]string{"sandbox.toml": img + "[compose]\nfile = \"compose.yaml\"\nignore = [\"container_name\", \"restart\", \"networks.ipv4_address\", \"privileged\"]\n", "compose.yaml": compose})
	r, err := p.load()
	if err != nil {
		t.Fatalf("with compose.ignore: %v", err)
	}
	if db := r.Services["db"]; !slices.Equal(db.Aliases, []string{"pg"}) {
		t.Errorf("aliases %v", db.Aliases)
	}
	for files, want := range map[string]string{
		"[compose]\nservices = [\"db\"]\n":                           "sandbox.toml:3: compose.file: is required",
		"[compose]\nfile = \"nope.yaml\"\n":                          "sandbox.toml:4: compose.file: cannot read the compose file: open ",
		"[compose]\nfile = \"compose.yaml\"\nservices = [\"web\"]\n": "sandbox.toml:5: compose.services: web is not a service of the compose file (services: db)",
	} {
		p := newProject(t, map[string]string{"sandbox.toml": img + files, "compose.yaml": "services:\n  db:\n    image: postgres\n"})
		if got := p.loadErr(); !strings.HasPrefix(got, want) {
			t.Errorf("%q:\n\tgot  %s\n\twant %s…", files, got, want)
		}
	}
}
