package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/network"

	"github.com/airlock-dev/airlock/sandbox"
)

const webManifest = `
[sandbox]
image = "{{image}}"

[daemons.web]
command = ["sh", "-c", "mkdir -p /www && echo hello > /www/index.html && exec httpd -f -p 8080 -h /www"]
ready = { tcp = "127.0.0.1:8080", timeout = "10s" }
`

// TestSharedNetworkIsolates: sandboxes without services share one network per
// Engine (no network made per sandbox) on which they cannot reach each other.
func TestSharedNetworkIsolates(t *testing.T) {
	limit(t)
	a := newEnv(t, webManifest)
	b := newEnv(t, webManifest)
	idA := strings.TrimSpace(a.MustRun("up", "-d").Stdout)
	idB := strings.TrimSpace(b.MustRun("up", "-d").Stdout)
	ctx := context.Background()
	ci, err := b.Cli.ContainerInspect(ctx, "airlock-"+idB)
	if err != nil {
		t.Fatal(err)
	}
	ep := ci.NetworkSettings.Networks[sandbox.SharedNetwork]
	if ep == nil || ep.IPAddress == "" {
		t.Fatalf("sandbox %s is not on %s: %v", idB, sandbox.SharedNetwork, ci.NetworkSettings.Networks)
	}
	if n, err := a.Cli.NetworkInspect(ctx, sandbox.SharedNetwork, networkInspectOptions()); err != nil || n.Options["com.docker.network.bridge.enable_icc"] != "false" {
		t.Errorf("%s: want inter-container communication disabled, got %v (%v)", sandbox.SharedNetwork, n.Options, err)
	}
	r := a.MustRun("exec", "--", "sh", "-c", "wget -qO- http://127.0.0.1:8080/; if timeout 3 wget -qO- http://"+ep.IPAddress+":8080/; then echo REACHED; else echo blocked; fi")
	contains(t, "exec in sandbox A", r.Stdout, "hello", "blocked")
	if strings.Contains(r.Stdout, "REACHED") {
		t.Errorf("sandbox %s reached sandbox %s over the shared network", idA, idB)
	}
	a.MustRun("down")
	b.MustRun("down")
	a.assertClean()
	b.assertClean()
}

func networkInspectOptions() network.InspectOptions { return network.InspectOptions{} }
