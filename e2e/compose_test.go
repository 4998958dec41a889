//go:build projects

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// composeFile is a compose.yaml in the style of real projects': a service that
// waits for a one-shot seeding job through a named volume they share, a page
// bind-mounted from the repository, a healthcheck with start_interval, an
// alias, a port published for the job on its runner's 127.0.0.1, a restart
// policy, a service in a profile, and a value interpolated from .env.
const composeFile = `volumes:
  seed:
services:
  web:
    image: IMAGE
    command: ["sh", "-c", "cat /seed/seed.txt /www-src/index.html > /www/index.html && exec httpd -f -p 8080 -h /www"]
    volumes:
      - ./site:/www-src:ro
      - seed:/seed:ro
    tmpfs: /www
    networks:
      default:
        aliases: [website]
    healthcheck:
      test: ["CMD", "wget", "-qO", "/dev/null", "http://127.0.0.1:8080/"]
      interval: 1h
      start_period: 1m
      start_interval: 200ms
    depends_on:
      seed:
        condition: service_completed_successfully
    ports: ["18080:8080"]
    restart: unless-stopped
  seed:
    image: IMAGE
    command: ["sh", "-c", "echo seeded-${SEED_WORD} > /seed/seed.txt"]
    volumes: [seed:/seed]
  debug:
    image: IMAGE
    profiles: [debug]
    command: ["sleep", "300"]
`

// TestComposeProject: [compose] runs a project's compose.yaml services as they
// are, a published port forwarded onto the sandbox's 127.0.0.1; a key airlock
// cannot honour is refused with the compose file's line until compose.ignore
// names it; a compose file the sandbox itself changes to
// mount a host folder does not take effect silently (design.md §6, issue 24).
func TestComposeProject(t *testing.T) {
	limit(t)
	e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\nready_timeout = \"30s\"\n[compose]\nfile = \"compose.yaml\"\n")
	e.WriteFile("compose.yaml", strings.ReplaceAll(composeFile, "IMAGE", e.Image))
	e.WriteFile(".env", "SEED_WORD=fromdotenv\n")
	e.WriteFile("site/index.html", "site-page\n")

	r := e.Run("run", "--", "true")
	if r.Code != 2 {
		t.Fatalf("restart in the compose file: want exit 2, got %s", r)
	}
	contains(t, "stderr", r.Stderr, `compose.yaml:23: services.web.restart: airlock cannot honour restart in a sandbox's service; remove it, or add "restart" to compose.ignore`)
	e.assertClean()

	e.WriteManifest("[sandbox]\nimage = \"{{image}}\"\nready_timeout = \"30s\"\n[compose]\nfile = \"compose.yaml\"\nignore = [\"restart\"]\n")
	r = e.Run("run", "--", "sh", "-c", "wget -qO- http://website:8080/ && wget -qO- http://127.0.0.1:18080/")
	if r.Code != 0 || r.Stdout != "seeded-fromdotenv\nsite-page\nseeded-fromdotenv\nsite-page\n" {
		t.Fatalf("run with the compose file's services: want exit 0 and the seeded page, got %s", r)
	}
	c := e.MustRun("config", "--layers")
	contains(t, "config --layers", c.Stdout, "services.web.aliases = [\"website\"]", "# compose.yaml:11")
	if strings.Contains(c.Stdout, "services.debug") {
		t.Errorf("a service of an inactive profile was taken:\n%s", c.Stdout)
	}
	e.waitGone()

	// The sandbox adds a service that mounts the host's ~/.ssh to its compose file.
	secret := e.hostSecret()
	spy := "  spy:\n    image: " + e.Image + "\n    command: [\"sh\", \"-c\", \"cat /keys/id_ed25519; sleep 300\"]\n    volumes: [\"" + filepath.Join(e.Home, ".ssh") + ":/keys:ro\"]\n"
	// A run sees compose.yaml read-only: its write fails.
	if r := e.Run("run", "--", "sh", "-c", "printf '%s' '"+spy+"' >> compose.yaml"); r.Code == 0 {
		t.Fatalf("a run wrote its compose file: %s", r)
	}
	// An up -d shell can write it (people edit there): the next start refuses it.
	e.MustRun("up", "-d")
	e.MustRun("exec", "--", "sh", "-c", "printf '%s' '"+spy+"' >> compose.yaml")
	e.MustRun("down")
	r = e.Run("run", "--", "true")
	if r.Code != 2 || strings.Contains(r.Stdout+r.Stderr, secret) {
		t.Fatalf("the sandbox's own compose.yaml edit: want exit 2 before anything runs, got %s", r)
	}
	contains(t, "stderr", r.Stderr, "compose.yaml changed while sandbox", "mounts (services.spy.volumes: "+filepath.Join(e.Home, ".ssh")+":/keys:ro)", "airlock trust")
	e.assertClean()
}
