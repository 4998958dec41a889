package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestRunEnvFromHostStaysPrivate: `run -e NAME` takes NAME from the CLI's
// environment (how CI passes tokens); the value reaches the main command but not
// the container's configuration (where the spec rides) nor the plan-hash label.
func TestRunEnvFromHostStaysPrivate(t *testing.T) {
	limit(t)
	e := newEnv(t, plainManifest)
	value := uniq("ci-t0ken")
	id := uniq("private-env")
	r := e.RunEnv([]string{"CI_TOKEN=" + value}, "run", "--keep", "--id", id, "-e", "CI_TOKEN", "-e", "LIT=shown", "--", "sh", "-c", "echo token=$CI_TOKEN lit=$LIT")
	if r.Code != 0 || !strings.Contains(r.Stdout, "token="+value+" lit=shown") {
		t.Fatalf("run -e CI_TOKEN: %s", r)
	}
	ci, err := e.Cli.ContainerInspect(context.Background(), "airlock-"+id)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ci)
	if strings.Contains(string(b), value) {
		t.Errorf("docker inspect shows the -e NAME value taken from the host")
	}
	e.MustRun("rm", id)
	e.assertClean()
}
