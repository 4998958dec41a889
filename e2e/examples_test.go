package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// demoImage is the image the examples name; tests tag the busybox test image so.
const demoImage = "airlock-demo/busybox:latest"

// exampleEnv copies examples/<name> into a fresh project dir.
func exampleEnv(t *testing.T, name string) *env {
	t.Helper()
	e := newEnv(t, "")
	if err := os.CopyFS(e.Project, os.DirFS(filepath.Join("..", "examples", name))); err != nil {
		t.Fatalf("cannot copy example %s: %v", name, err)
	}
	return e
}

// tagDemoImage makes airlock-demo/busybox:latest, the examples' image.
func tagDemoImage(t *testing.T, e *env) {
	t.Helper()
	if err := e.Cli.ImageTag(context.Background(), e.Image, demoImage); err != nil {
		t.Fatalf("cannot tag %s as %s: %v", e.Image, demoImage, err)
	}
}

func TestExampleHello(t *testing.T) {
	limit(t)
	e := exampleEnv(t, "hello")
	tagDemoImage(t, e)
	want, err := os.ReadFile(filepath.Join("..", "examples", "hello", "site", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	r := e.Run("run", "--", "wget", "-qO-", "http://127.0.0.1:8080/")
	if r.Code != 0 || r.Stdout != string(want) {
		t.Errorf("want the page %q and exit 0, got %s", want, r)
	}
	e.assertClean()
}

func TestExampleServices(t *testing.T) {
	limit(t)
	e := exampleEnv(t, "services")
	tagDemoImage(t, e)
	id := uniq("services")
	r := e.Run("run", "--id", id, "--", "wget", "-qO-", "http://web:8080/")
	if r.Code != 0 || r.Stdout != "<h1>hello from the web service</h1>\n" {
		t.Errorf("want the web service's page and exit 0, got %s", r)
	}
	e.assertClean()
	// The history outlives the sandbox: service.ready came before sandbox.ready.
	// (run returns once the daemon took the removal over; it records its end.)
	var ev string
	eventually(t, 30*time.Second, "sandbox.deleted", func() bool {
		ev = e.MustRun("events", id).Stdout
		return strings.Contains(ev, "sandbox.deleted")
	})
	if i, j := strings.Index(ev, "service.ready"), strings.Index(ev, "sandbox.ready"); i < 0 || j < i || !strings.Contains(ev, "sandbox.deleted") {
		t.Errorf("events of the run lack service.ready before sandbox.ready, or sandbox.deleted:\n%s", ev)
	}
}

// TestExampleRedisCI checks the manifest only: its image needs a registry to build.
func TestExampleRedisCI(t *testing.T) {
	limit(t)
	e := exampleEnv(t, "redis-ci")
	e.MustRun("validate")
	r := e.MustRun("config")
	contains(t, "airlock config", r.Stdout, "[daemons.redis]", "redis-server", "REDIS_URL", "airlock-demo/redis-ci:latest")
	mk, err := os.ReadFile(filepath.Join(e.Project, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "redis-cli ping") {
		t.Errorf("the Makefile's test target does not ping redis")
	}
	e.assertClean()
}
