package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitFromCompose: `init --from compose.yaml` writes the compose file's
// services as [services.*] tables that validate: binds relative to the
// project, ${VAR} in environment values kept (airlock substitutes them at each
// run: no host value lands in the file), and every key it could not take
// listed with its line.
func TestInitFromCompose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "compose.yaml"), `services:
  db:
    image: postgres:${PG_TAG:-16}
    environment:
      POSTGRES_PASSWORD: ${PGPASS_FOR_INIT_TEST}
    volumes: ["./ci/init:/docker-entrypoint-initdb.d:ro"]
    ports: ["5432:5432"]
    restart: always
    shm_size: 256m
    healthcheck:
      test: pg_isready
      start_interval: 1s
`)
	writeFile(t, filepath.Join(dir, ".env"), "PGPASS_FOR_INIT_TEST=host-value-must-not-be-written\n")
	r := airlock(t, nil, "--file", dir, "init", "--image", "busybox:latest", "--from", filepath.Join(dir, "compose.yaml"))
	if r.code != 0 {
		t.Fatalf("init --from: exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sandbox.toml"))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		"#   services.db.restart (compose.yaml:8)",
		`ports = ["5432:5432"]`,
		`image = "postgres:16"`,
		`POSTGRES_PASSWORD = "${PGPASS_FOR_INIT_TEST}"`,
		`volumes = ["./ci/init:/docker-entrypoint-initdb.d:ro"]`,
		`shm_size = "256m"`,
		`cmd = ["/bin/sh", "-c", "pg_isready"]`,
		`start_interval = "1s"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("sandbox.toml lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "host-value-must-not-be-written") {
		t.Errorf("a host value was written into sandbox.toml:\n%s", got)
	}
	if err := os.MkdirAll(filepath.Join(dir, "ci", "init"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := airlock(t, map[string]string{"PGPASS_FOR_INIT_TEST": "set"}, "--file", filepath.Join(dir, "sandbox.toml"), "validate"); r.code != 0 {
		t.Errorf("the written manifest does not validate: %s\n%s", r.stderr, got)
	}
}

// TestInitFromComposeChoosesServices: --services takes only the named
// services (with what they depend on), and a go.mod at the project's root
// adds the go tool, to init with or without --from.
func TestInitFromComposeChoosesServices(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "compose.yaml"), `services:
  app:
    image: busybox
    depends_on: [cache]
  cache:
    image: redis:7
  mssql:
    image: mcr.microsoft.com/mssql/server:2022-latest
`)
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/m\n\ngo 1.26\n")
	r := airlock(t, nil, "--file", dir, "init", "--from", filepath.Join(dir, "compose.yaml"), "--services", "app")
	if r.code != 0 {
		t.Fatalf("init --from --services: exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sandbox.toml"))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"[services.app]", "[services.cache]", `tools = ["go"]`} {
		if !strings.Contains(got, want) {
			t.Errorf("sandbox.toml lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "mssql") {
		t.Errorf("a service not asked for was taken:\n%s", got)
	}

	plain := t.TempDir()
	writeFile(t, filepath.Join(plain, "go.mod"), "module example.com/m\n")
	if r := airlock(t, nil, "--file", plain, "init"); r.code != 0 {
		t.Fatalf("init: %s", r.stderr)
	}
	b, _ = os.ReadFile(filepath.Join(plain, "sandbox.toml"))
	if !strings.Contains(string(b), `tools = ["go"]`) {
		t.Errorf("init in a Go project did not add the go tool:\n%s", b)
	}
	if r := airlock(t, nil, "--file", plain, "validate"); r.code != 0 {
		t.Errorf("the written manifest does not validate: %s", r.stderr)
	}
}
