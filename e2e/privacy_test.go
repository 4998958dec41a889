package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestRunEnvFromHostStaysPrivate: `run -e NAME` takes NAME from the CLI's
// environment (how CI passes tokens), and `run -e NAME=VALUE` gives VALUE; both
// reach the main command but not the container's configuration (where the spec
// rides, as PID 1's arguments: /proc/1/cmdline for the host's users of that
// uid) nor the plan-hash label.
func TestRunEnvFromHostStaysPrivate(t *testing.T) {
	limit(t)
	e := newEnv(t, plainManifest)
	value := uniq("ci-t0ken")
	id := uniq("private-env")
	lit := uniq("lit3ral")
	r := e.RunEnv([]string{"CI_TOKEN=" + value}, "run", "--keep", "--id", id, "-e", "CI_TOKEN", "-e", "LIT="+lit, "-e", "EMPTY=", "--", "sh", "-c", "echo token=$CI_TOKEN lit=$LIT empty=${EMPTY-unset}.; tr '\\0' ' ' < /proc/1/cmdline")
	if r.Code != 0 || !strings.Contains(r.Stdout, "token="+value+" lit="+lit+" empty=.") {
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
	if strings.Contains(string(b), lit) {
		t.Errorf("docker inspect shows the -e NAME=VALUE value")
	}
	if strings.Count(r.Stdout, lit) != 1 {
		t.Errorf("PID 1's command line shows the -e NAME=VALUE value:\n%s", r.Stdout)
	}
	e.MustRun("rm", id)
	e.assertClean()
}
