package control_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// poolUpText is an idle sandbox with a daemon and a warm pool of 3; its
// [env] takes a value at the claim.
const poolUpText = `
[sandbox]
image = "{{image}}"
network = "none"

[sandbox.pool]
size = 3

[env]
TOKEN = "${TOKEN}"

[daemons.idle]
command = ["sh", "-c", "echo idle-up; exec sleep 300"]
ready = { log = "idle-up", timeout = "20s" }
`

// TestPoolCreateUp: an API create of kind up (what the SDK's create sends),
// with an ID of the caller's, labels and env, takes a parked sandbox of its
// manifest's pool: pool.claimed in its history, the caller's ID and labels
// on its record (and in a list filtered by them), the claim's [env] value
// and env entry seen by an exec. A stop, a delete and a drain leave nothing.
func TestPoolCreateUp(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 4*time.Minute)
	text := strings.ReplaceAll(poolUpText, "{{image}}", e.image)
	src := func(token string) client.ManifestSource {
		return client.ManifestSource{ManifestTOML: text, ProjectDir: e.project, Vars: map[string]string{"TOKEN": token}}
	}
	p, err := c.WarmPool(ctx, &client.WarmRequest{ManifestSource: src("warm-value")})
	if err != nil {
		t.Fatal(err)
	}
	if p.Ready != 3 {
		t.Fatalf("warmed pool: %d ready, want 3 (%+v)", p.Ready, p)
	}
	parked := map[string]bool{}
	for _, sb := range p.Sandboxes {
		parked[sb.Container] = true
	}

	id := "mine-" + strings.ReplaceAll(t.Name(), "/", "-")
	labels := map[string]string{"owner": "pool-test", "n": "1"}
	sb, err := c.Create(ctx, &client.CreateRequest{ID: id, Kind: "up", Start: true, Labels: labels,
		Env: []string{"EXTRA=from-create"}, ManifestSource: src("claim-value")})
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID != id {
		t.Fatalf("the create answered sandbox %s, want the caller's %s", sb.ID, id)
	}
	// A parked sandbox is created when the create answers: its container
	// and the events of its making are in the answer (a run does not wait
	// for them).
	if !parked[sb.Container] || sb.LastSeq < 4 {
		t.Errorf("the create's answer: container %q (parked: %v), last sequence %d; want a parked container and 4 events recorded", sb.Container, parked[sb.Container], sb.LastSeq)
	}
	ready := waitReady(t, c, id)
	evs := allEvents(t, c, id)
	if got := kinds(evs); len(got) < 4 || !slices.Equal(got[:4], []string{"sandbox.accepted", "sandbox.preparing", "sandbox.created", "pool.claimed"}) {
		t.Errorf("the history of a claimed sandbox starts %v, want accepted, preparing, created, pool.claimed", got)
	}
	if !slices.Contains(kinds(evs), "pool.claimed") {
		t.Fatalf("the create did not take a parked sandbox (no pool.claimed):\n%s", dumpEvents(c, id))
	}
	if i := indexOf(evs, "pool.missed"); i >= 0 {
		t.Errorf("pool.missed (%s) in the history of a claimed sandbox", evs[i].Reason)
	}
	if ready.Kind != "up" || ready.Labels["owner"] != "pool-test" || ready.Labels["n"] != "1" {
		t.Errorf("the record: kind %s labels %v, want up and %v", ready.Kind, ready.Labels, labels)
	}
	list, err := c.List(ctx, map[string]string{"owner": "pool-test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != id {
		t.Errorf("list by label: %v, want only %s", list, id)
	}
	var out, stderr bytes.Buffer
	_, code, err := c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo $TOKEN $EXTRA"}}, &out, &stderr)
	if err != nil || code != 0 {
		t.Fatalf("exec: code %d, %v\n%s", code, err, stderr.String())
	}
	if got := strings.TrimSpace(out.String()); got != "claim-value from-create" {
		t.Errorf("the exec saw %q, want the claim's values %q", got, "claim-value from-create")
	}
	// The sandbox is one of the parked ones, under the caller's ID.
	if got, err := c.Get(ctx, id); err != nil || !parked[got.Container] {
		t.Errorf("the sandbox's container is none of the parked ones %v: %+v, %v", parked, got, err)
	}
	if got := poolOf(t, c, e.project); got.Hits != 1 {
		t.Errorf("pool hits %d, want 1 (misses %v)", got.Hits, got.Misses)
	}
	if _, err := c.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, time.Minute, client.StateStopped)
	if _, err := c.Resume(ctx, id, nil); err == nil || !strings.Contains(err.Error(), "warm pool") {
		t.Errorf("resume of a claimed sandbox: %v, want a refusal naming the warm pool", err)
	}
	if _, err := c.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, time.Minute, client.StateDeleted)
	if _, err := c.DrainPools(ctx, &client.DrainRequest{Project: e.project}); err != nil {
		t.Fatal(err)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// TestPoolCreateIDRestart: a sandbox claimed under the caller's ID keeps the
// parked sandbox's Engine objects; a daemon started after a kill -9 of the one
// that claimed it finds it by its record (still ready, an exec runs), a
// service result or a death is still the record's, and its delete removes
// the Engine objects of the parked name: nothing is left.
func TestPoolCreateIDRestart(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 4*time.Minute)
	text := strings.ReplaceAll(poolUpText, "{{image}}", e.image)
	src := client.ManifestSource{ManifestTOML: text, ProjectDir: e.project, Vars: map[string]string{"TOKEN": "v1"}}
	if _, err := c.WarmPool(ctx, &client.WarmRequest{ManifestSource: src, Size: 1}); err != nil {
		t.Fatal(err)
	}
	id := "restart-" + strings.ReplaceAll(t.Name(), "/", "-")
	if _, err := c.Create(ctx, &client.CreateRequest{ID: id, Kind: "up", Start: true, ManifestSource: src}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, id)
	if !slices.Contains(kinds(allEvents(t, c, id)), "pool.claimed") {
		t.Fatalf("no pool.claimed:\n%s", dumpEvents(c, id))
	}
	// An ID once used, given again, is refused and takes no parked sandbox.
	before := poolOf(t, c, e.project)
	if _, err := c.Create(ctx, &client.CreateRequest{ID: id, Kind: "up", Start: true, ManifestSource: src}); apiReason(err) != client.ReasonIDAlreadyUsed {
		t.Errorf("a create with a used ID: %v, want %s", err, client.ReasonIDAlreadyUsed)
	}
	if after := poolOf(t, c, e.project); after.Hits != before.Hits {
		t.Errorf("a refused create took a parked sandbox (hits %d, then %d)", before.Hits, after.Hits)
	}

	d.stop(t, syscall.SIGKILL)
	c = e.startDaemon(binA).client
	got, err := c.Get(ctx, id)
	if err != nil || got.State != client.StateReady {
		t.Fatalf("after a restart: %+v, %v; want ready\n%s", got, err, dumpEvents(c, id))
	}
	var out, stderr bytes.Buffer
	if _, code, err := c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo $TOKEN"}}, &out, &stderr); err != nil || code != 0 || strings.TrimSpace(out.String()) != "v1" {
		t.Errorf("exec after a restart: code %d, %v, %q %q", code, err, out.String(), stderr.String())
	}
	// Its primary killed on the Engine: the death is the record's.
	if err := e.docker.ContainerKill(ctx, got.Container, "KILL"); err != nil {
		t.Fatal(err)
	}
	end, _ := waitState(t, c, id, time.Minute, client.StateFailed, client.StateStopped)
	if end.State != client.StateFailed && end.State != client.StateStopped {
		t.Errorf("after its primary was killed: %s", end.State)
	}
	if _, err := c.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, time.Minute, client.StateDeleted)
	if _, err := c.DrainPools(ctx, &client.DrainRequest{Project: e.project}); err != nil {
		t.Fatal(err)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// TestPoolRefillParallel: the refill of a pool makes several sandboxes at
// once (GET /v1/pools shows more than one starting), never more than its
// size, nor more sandboxes pooled than runtime.pool_max.
func TestPoolRefillParallel(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeUserConfig("[runtime]\npool_max = 4\n")
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 4*time.Minute)
	text := strings.ReplaceAll(poolUpText, "{{image}}", e.image)
	src := client.ManifestSource{ManifestTOML: text, ProjectDir: e.project, Vars: map[string]string{"TOKEN": "v"}}

	var mu sync.Mutex
	maxStarting, maxPooled := 0, 0
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for pctx.Err() == nil {
			if list, err := c.Pools(pctx); err == nil {
				mu.Lock()
				maxPooled = max(maxPooled, list.Pooled)
				for _, p := range list.Pools {
					maxStarting = max(maxStarting, p.Starting)
				}
				mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	p, err := c.WarmPool(ctx, &client.WarmRequest{ManifestSource: src})
	stop()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if p.Ready != 3 {
		t.Fatalf("warmed pool: %d ready, want 3", p.Ready)
	}
	mu.Lock()
	defer mu.Unlock()
	if maxStarting < 2 || maxStarting > 3 {
		t.Errorf("at most %d sandboxes were being made at once, want 2 or 3 (in parallel, within the size)", maxStarting)
	}
	if maxPooled > 4 {
		t.Errorf("%d sandboxes pooled at once, more than runtime.pool_max 4", maxPooled)
	}
	if _, err := c.DrainPools(ctx, &client.DrainRequest{Project: e.project}); err != nil {
		t.Fatal(err)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// poolOf is the pool of project in GET /v1/pools.
func poolOf(t *testing.T, c *client.Client, project string) client.Pool {
	t.Helper()
	list, err := c.Pools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Pools {
		if p.Project == project {
			return p
		}
	}
	t.Fatalf("GET /v1/pools has no pool of %s: %+v", project, list)
	return client.Pool{}
}
