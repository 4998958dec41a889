//go:build projects

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
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
// Podman cannot keep sandboxes on its networks apart: there the sandbox is
// refused, saying why, and nothing is left.
func TestSharedNetworkIsolates(t *testing.T) {
	limit(t)
	a := newEnv(t, webManifest)
	if podmanEngine(t, a.Cli) {
		a.startFails(cmdTimeout, "cannot keep the sandbox apart from other sandboxes", "the Engine (Podman ",
			"enable_icc", "isolation between its networks", `sandbox.network = "none"`)
		return
	}
	b := newEnv(t, webManifest)
	idA := strings.TrimSpace(a.MustRun("up", "-d").Stdout)
	idB := strings.TrimSpace(b.MustRun("up", "-d").Stdout)
	ctx := context.Background()
	ci, err := b.Cli.ContainerInspect(ctx, "airlock-"+idB)
	if err != nil {
		t.Fatal(err)
	}
	ep := ci.NetworkSettings.Networks[docker.SharedNetwork]
	if ep == nil || ep.IPAddress == "" {
		t.Fatalf("sandbox %s is not on %s: %v", idB, docker.SharedNetwork, ci.NetworkSettings.Networks)
	}
	// By ID: TestSharedNetworkDuplicate may have made a second network of
	// that name meanwhile, which makes the name ambiguous to the Engine.
	if n, err := a.Cli.NetworkInspect(ctx, ep.NetworkID, networkInspectOptions()); err != nil || n.Options["com.docker.network.bridge.enable_icc"] != "false" {
		t.Errorf("%s: want inter-container communication disabled, got %v (%v)", docker.SharedNetwork, n.Options, err)
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

// TestSharedNetworkDuplicate: two processes making the shared network at once can
// leave two networks of that name (Engine 20.10's duplicate check is not atomic),
// and a network name that matches two networks is ambiguous to the Engine. A
// sandbox still starts, on the oldest of them, and the other is removed: by a
// daemon that knows the network already too (Engine 20.10 keys a container's
// networks by name, so its start failed "network airlock-shared is ambiguous"
// although it was created with the network's ID; seen in CI when this test's
// duplicate met another test's start).
func TestSharedNetworkDuplicate(t *testing.T) {
	limit(t)
	skipOnPodman(t, "it refuses a second network of one name, so the race this test makes cannot happen there")
	a := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	a.MustRun("run", "--", "true")
	ctx := context.Background()
	body := `{"Name":"` + docker.SharedNetwork + `","Driver":"bridge","CheckDuplicate":false,` +
		`"Options":{"com.docker.network.bridge.enable_icc":"false"},"Labels":{"` + docker.LabelShared + `":"true"}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://docker/v1.41/networks/create", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.Cli.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var made struct{ ID string }
	err = json.NewDecoder(resp.Body).Decode(&made)
	resp.Body.Close()
	if resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusBadRequest {
		// Engine 25 and later check names atomically, whatever the request says
		// (409); Engine 29 refuses API 1.41 too (400, client version too old).
		t.Skipf("this Engine refuses a second network named %s (%s): the duplicate cannot arise on it", docker.SharedNetwork, resp.Status)
	}
	if resp.StatusCode != http.StatusCreated || err != nil || made.ID == "" {
		t.Fatalf("cannot make a second %s: %s %v", docker.SharedNetwork, resp.Status, err)
	}
	t.Cleanup(func() { _ = a.Cli.NetworkRemove(context.Background(), made.ID) })

	// a's daemon knows the shared network's ID from its first run.
	if r := a.Run("run", "--", "echo", "known-network"); r.Code != 0 || !strings.Contains(r.Stdout, "known-network") {
		t.Errorf("run by a daemon that knew the shared network, beside a duplicate: %s", r)
	}

	b := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	r := b.Run("run", "--", "echo", "on-the-shared-network")
	if r.Code != 0 || !strings.Contains(r.Stdout, "on-the-shared-network") {
		t.Fatalf("run beside two %s networks: %s", docker.SharedNetwork, r)
	}
	list, err := b.Cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", docker.SharedNetwork))})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range list {
		if n.Name == docker.SharedNetwork {
			ids = append(ids, n.ID)
		}
	}
	if len(ids) != 1 || ids[0] == made.ID {
		t.Errorf("after the run, %s networks %v (the younger duplicate %s should be gone)", docker.SharedNetwork, ids, made.ID)
	}
	a.assertClean()
	b.assertClean()
}

// TestSharedNetworkShards: with runtime.shared_network_max = 5, twelve
// sandboxes made at once fill the shared network's shards in order — five on
// each but the last beyond the first shard, which other tests' sandboxes share
// — each shard made on demand with inter-container communication off; every
// sandbox answers; once they are gone, so are the shards beyond the first.
func TestSharedNetworkShards(t *testing.T) {
	limit(t)
	skipOnPodman(t, `sandbox.network = "bridge" is refused there (TestSharedNetworkIsolates)`)
	e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	if err := os.MkdirAll(filepath.Join(e.Config, "airlock"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Config, "airlock", "config.toml"), []byte("[runtime]\nshared_network_max = 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.MustRun("ps") // the daemon, with that config
	c := e.daemonAPI()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	wm, _ := clitest.WireManifest(t, e.Project, e.Getenv)
	const n = 12
	ids := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range ids {
		ids[i] = fmt.Sprintf("shard-%d-%s", i, randomKey()[:8])
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := c.Create(ctx, &client.CreateRequest{ID: ids[i], Kind: "up", Manifest: wm, Start: true}); err != nil {
				t.Errorf("create %s: %v", ids[i], err)
				return
			}
			if sb, _, err := c.WaitState(ctx, ids[i], client.StateReady, client.StateFailed); err != nil || sb.State != client.StateReady {
				t.Errorf("%s: %+v, %v", ids[i], sb, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	perShard := map[string]int{} // of this test's sandboxes
	for _, id := range ids {
		ci, err := e.Cli.ContainerInspect(ctx, "airlock-"+id)
		if err != nil {
			t.Fatal(err)
		}
		shard := ci.Config.Labels[docker.LabelShard]
		if ci.NetworkSettings.Networks[shard] == nil {
			t.Errorf("%s: labelled with shard %q, on %v", id, shard, ci.NetworkSettings.Networks)
		}
		perShard[shard]++
		if r := e.MustRun("exec", id, "--", "echo", "answers"); !strings.Contains(r.Stdout, "answers") {
			t.Errorf("exec in %s: %s", id, r)
		}
	}
	// Beyond the first shard only this test's daemon goes (the others keep
	// the default of 1000): shards 2, 3, … hold at most 5 each. (Created 4 at
	// a time, one may be left a place short when a create counted there moved
	// on: seen on Engine 29, where two creates race to make the next shard.)
	last := 1
	for k := 2; perShard[docker.ShardName(k)] > 0; k++ {
		last = k
	}
	beyond := 0
	for k := 2; k <= last; k++ {
		name := docker.ShardName(k)
		beyond += perShard[name]
		if got := perShard[name]; got > 5 || (k < last && got < 3) {
			t.Errorf("%s holds %d of the sandboxes; want at most 5 (and not fewer than 3 but on the last): %v", name, got, perShard)
		}
		nw, err := e.Cli.NetworkInspect(ctx, name, network.InspectOptions{})
		if err != nil || nw.Options["com.docker.network.bridge.enable_icc"] != "false" || nw.Labels[docker.LabelShared] != "true" {
			t.Errorf("%s: want a shared network with inter-container communication off, got %v %v (%v)", name, nw.Options, nw.Labels, err)
		}
	}
	// The first shard is every daemon's: full of other tests' sandboxes (or
	// TestSharedNetworkRecount's fillers), it may hold none of these.
	shards := last
	if perShard[docker.SharedNetwork] == 0 {
		shards--
	}
	if beyond+perShard[docker.SharedNetwork] != n || beyond < n-5 || len(perShard) != shards {
		t.Errorf("shards of the %d sandboxes: %v", n, perShard)
	}
	for _, id := range ids {
		e.deleteThroughAPI(c, id)
	}
	list, err := e.Cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", docker.SharedNetwork+"-"))})
	if err != nil {
		t.Fatal(err)
	}
	// A shard may still hold another test's sandbox (TestSharedNetworkRecount's
	// goes beyond the first): it goes with that one's removal, by its daemon.
	for _, nw := range list {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if _, err := e.Cli.NetworkInspect(ctx, nw.ID, network.InspectOptions{}); err != nil {
				break // gone
			}
			others, err := e.Cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", docker.LabelShard+"="+nw.Name))})
			if err == nil && len(others) > 0 {
				break // another sandbox's still: it goes with that one
			}
			if time.Now().After(deadline) {
				t.Errorf("network %s is left after its last sandbox went", nw.Name)
				break
			}
		}
	}
	// Listed, not inspected by name: TestSharedNetworkDuplicate may have made
	// a second network of that name meanwhile (an ambiguous name to the Engine).
	first, err := e.Cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", "^"+docker.SharedNetwork+"$"))})
	if err != nil || len(first) == 0 {
		t.Errorf("the first shard went too: %v", err)
	}
	e.assertClean()
}

// TestSharedNetworkRecount: the daemon keeps a shard's count for
// docker.ShardRecount rather than listing its containers for every sandbox;
// after that it lists them again, so containers other daemons put on the shard
// meanwhile (here: made straight on the Engine, labelled as sandboxes of the
// shard are) send the next sandbox to the next shard.
func TestSharedNetworkRecount(t *testing.T) {
	limit(t)
	skipOnPodman(t, `sandbox.network = "bridge" is refused there (TestSharedNetworkIsolates)`)
	const max = 60 // above the margin within which every sandbox lists
	e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	if err := os.MkdirAll(filepath.Join(e.Config, "airlock"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Config, "airlock", "config.toml"), []byte(fmt.Sprintf("[runtime]\nshared_network_max = %d\n", max)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e.MustRun("run", "--", "true") // the daemon counts airlock-shared
	counted := time.Now()
	filler := "dev.airlock.test-filler=" + randomKey()[:8]
	k, v, _ := strings.Cut(filler, "=")
	t.Cleanup(func() { testenv.ForceRemove(e.Cli, k, v) })
	for i := range max {
		_, err := e.Cli.ContainerCreate(ctx, &container.Config{Image: e.Image, Cmd: []string{"true"},
			Labels: map[string]string{k: v, docker.LabelShard: docker.SharedNetwork}}, nil, nil, nil, fmt.Sprintf("airlock-filler-%s-%d", v, i))
		if err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Until(counted.Add(docker.ShardRecount))) // the count's time is the condition
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	ci, err := e.Cli.ContainerInspect(ctx, "airlock-"+id)
	if err != nil {
		t.Fatal(err)
	}
	if shard := ci.Config.Labels[docker.LabelShard]; shard == docker.SharedNetwork || ci.NetworkSettings.Networks[shard] == nil {
		t.Errorf("with %d containers on %s, the sandbox joined %q (on %v)", max, docker.SharedNetwork, shard, ci.NetworkSettings.Networks)
	}
	e.MustRun("down")
	e.assertClean()
}
