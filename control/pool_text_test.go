package control_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestWarmPoolFromManifestText: POST /v1/pools/warm takes a manifest text as
// POST /v1/sandboxes does (manifest_toml, project_dir, vars), resolved by the
// daemon the same way: a run created from the same text takes the parked
// sandbox (pool.claimed in its history), and a drain leaves nothing parked.
func TestWarmPoolFromManifestText(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 3*time.Minute)
	text := strings.ReplaceAll(`
[sandbox]
image = "{{image}}"
network = "none"

[sandbox.pool]
size = 1

[env]
GREETING = "${GREETING}"
`, "{{image}}", e.image)
	vars := map[string]string{"GREETING": "hello-pool"}

	// A manifest and a text together are refused, as by a create.
	wm, secrets := e.wire()
	_, err := c.WarmPool(ctx, &client.WarmRequest{Manifest: wm, Secrets: secrets, ManifestSource: client.ManifestSource{ManifestTOML: text}})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Reason != client.ReasonInvalidRequest || !strings.Contains(ce.Message, "not both") {
		t.Errorf("a warm with a manifest and a text: %v, want %s", err, client.ReasonInvalidRequest)
	}
	if _, err := c.WarmPool(ctx, &client.WarmRequest{ManifestSource: client.ManifestSource{Vars: vars}}); !errors.As(err, &ce) || ce.Reason != client.ReasonInvalidRequest {
		t.Errorf("a warm with vars and no manifest: %v, want %s", err, client.ReasonInvalidRequest)
	}

	p, err := c.WarmPool(ctx, &client.WarmRequest{ManifestSource: client.ManifestSource{ManifestTOML: text, ProjectDir: e.project, Vars: vars}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Project != e.project || p.Size != 1 || p.Ready != 1 {
		t.Fatalf("warmed pool: project %s size %d ready %d, want %s 1 1 (%+v)", p.Project, p.Size, p.Ready, e.project, p)
	}
	pool := func() client.Pool {
		t.Helper()
		list, err := c.Pools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Pools {
			if p.Project == e.project {
				return p
			}
		}
		t.Fatalf("GET /v1/pools has no pool of %s: %+v", e.project, list)
		return client.Pool{}
	}
	got := pool()
	if got.Ready != 1 || len(got.Sandboxes) != 1 || got.Key != p.Key {
		t.Fatalf("GET /v1/pools: ready %d, %d sandboxes, key %s; want 1, 1, %s", got.Ready, len(got.Sandboxes), got.Key, p.Key)
	}
	parked := got.Sandboxes[0].ID

	// A run from the same text takes it.
	sb, err := c.Create(ctx, &client.CreateRequest{Kind: "run", Start: true, Command: []string{"hostname"},
		ManifestSource: client.ManifestSource{ManifestTOML: text, ProjectDir: e.project, Vars: vars}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID != parked {
		t.Errorf("the run is sandbox %s, want the parked %s", sb.ID, parked)
	}
	end, ev := waitState(t, c, sb.ID, time.Minute, client.StateStopped, client.StateFailed)
	if end.State != client.StateStopped {
		t.Fatalf("the pooled run is %s (%s)\nevents:\n%s", end.State, ev.Reason, dumpEvents(c, sb.ID))
	}
	evs := allEvents(t, c, sb.ID)
	if !slices.Contains(kinds(evs), "pool.claimed") {
		t.Errorf("the run's events have no pool.claimed:\n%s", dumpEvents(c, sb.ID))
	}
	i := indexOf(evs, "main.exited")
	if i < 0 || evs[i].ExitCode == nil || *evs[i].ExitCode != 0 {
		t.Errorf("the run's main command did not exit 0:\n%s", dumpEvents(c, sb.ID))
	}
	if got := pool(); got.Hits != 1 {
		t.Errorf("pool hits %d, want 1 (misses %v)", got.Hits, got.Misses)
	}

	if _, err := c.DrainPools(ctx, &client.DrainRequest{Project: e.project}); err != nil {
		t.Fatal(err)
	}
	list, err := c.Pools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if list.Pooled != 0 {
		t.Errorf("after the drain %d sandboxes are pooled, want 0: %+v", list.Pooled, list)
	}
	if _, err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, sb.ID, time.Minute, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}
