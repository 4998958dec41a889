//go:build soak

package soak

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/test/clitest"
)

// fillerLabel marks the containers TestSharedNetworkAtDefault puts on the
// first shard; their removal is by this label.
const fillerLabel = "dev.airlock.soak-filler"

// TestSharedNetworkAtDefault (issue 25): the shared network's shard limit at its
// real default (docker.DefaultSharedNetworkMax, 1000) on a real bridge. The first
// shard is filled to the limit with started containers, each a real port on its
// bridge and labelled as a sandbox of that shard is (what the daemon counts), so
// the bridge holds 1000 endpoints, below its 1023 ports; then an `up -d`
// sandbox goes to airlock-shared-2, answers an exec, and its `down` removes the
// second shard with it.
func TestSharedNetworkAtDefault(t *testing.T) {
	e := clitest.New(t, "[sandbox]\nimage = \"{{image}}\"\n")
	ctx := context.Background()
	cli := e.Cli
	// removeFillers kills the fillers, then removes them, 4 at a time: 16
	// concurrent force-removals of started containers on one full bridge hung
	// Engine 20.10 (docs/reliability.md).
	removeFillers := func() {
		list, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", fillerLabel))})
		each := func(f func(id string)) {
			benchdoc.Each(len(list), 4, func(i int) error { f(list[i].ID); return nil })
		}
		each(func(id string) { _ = cli.ContainerKill(ctx, id, "KILL") })
		each(func(id string) { _ = cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}) })
	}
	removeFillers() // an earlier run's, interrupted
	t.Cleanup(removeFillers)

	e.MustRun("run", "--", "true") // the daemon, with the default config, and airlock-shared
	// The shard's members but this project's: the run's sandbox is on its
	// way out, and is not there any more when the up comes.
	members := func(shard string) int {
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", docker.LabelShard+"="+shard))})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range list {
			if c.Labels[backend.LabelProject] != e.Project {
				n++
			}
		}
		return n
	}
	var errs []error
	made := 0
	// add puts k more fillers on the first shard, 16 at a time.
	add := func(k int) {
		_, failed := benchdoc.Each(k, 16, func(i int) error {
			name := fmt.Sprintf("airlock-soak-filler-%d", made+i)
			c, err := cli.ContainerCreate(ctx, &container.Config{
				Image:  e.Image,
				Cmd:    []string{"sleep", "3600"},
				Labels: map[string]string{fillerLabel: "true", docker.LabelShard: docker.SharedNetwork},
			}, &container.HostConfig{NetworkMode: container.NetworkMode(docker.SharedNetwork)}, &network.NetworkingConfig{}, nil, name)
			if err == nil {
				err = cli.ContainerStart(ctx, c.ID, container.StartOptions{})
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			return nil
		})
		errs = append(errs, failed...)
		made += k
	}
	start := time.Now()
	// Up to the limit, and again while other sandboxes on the Engine left
	// the shard meanwhile.
	for m := members(docker.SharedNetwork); m < docker.DefaultSharedNetworkMax && len(errs) == 0; m = members(docker.SharedNetwork) {
		add(docker.DefaultSharedNetworkMax - m)
	}
	fill := made
	filled := time.Since(start)
	if len(errs) > 0 {
		t.Fatalf("%d of %d containers could not join %s (the first: %v)", len(errs), fill, docker.SharedNetwork, errs[0])
	}
	ni, err := cli.NetworkInspect(ctx, docker.SharedNetwork, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	endpoints := len(ni.Containers)

	upStart := time.Now()
	r := e.MustRun("up", "-d")
	upTook := time.Since(upStart)
	id := strings.TrimSpace(r.Stdout)
	ci, err := cli.ContainerInspect(ctx, "airlock-"+id)
	if err != nil {
		t.Fatalf("%v (up said %s)", err, r)
	}
	shard := ci.Config.Labels[docker.LabelShard]
	if want := docker.ShardName(2); shard != want || ci.NetworkSettings.Networks[want] == nil {
		t.Errorf("the sandbox after %d on %s: labelled %q, on %v; want %s", docker.DefaultSharedNetworkMax, docker.SharedNetwork, shard, keys(ci.NetworkSettings.Networks), want)
	}
	if out := e.MustRun("exec", id, "--", "echo", "answers"); !strings.Contains(out.Stdout, "answers") {
		t.Errorf("exec: %s", out)
	}
	e.MustRun("down")
	gone := false
	deadline := time.Now().Add(30 * time.Second)
	for !gone && time.Now().Before(deadline) {
		if _, err := cli.NetworkInspect(ctx, docker.ShardName(2), network.InspectOptions{}); err != nil {
			gone = true
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !gone {
		t.Errorf("%s is still there after the down of its last sandbox", docker.ShardName(2))
	}
	verdict := "PASS"
	if t.Failed() {
		verdict = "FAIL"
	}
	rows := []benchdoc.Row{
		{Measure: fmt.Sprintf("started containers put on %s (16 at a time); time", docker.SharedNetwork), Result: fmt.Sprintf("%d; %s", fill, benchdoc.MS(filled))},
		{Measure: fmt.Sprintf("endpoints on %s's bridge", docker.SharedNetwork), Result: strconv.Itoa(endpoints), Target: "≤ 1023"},
		{Measure: "the next `up -d`: its shard; time", Result: fmt.Sprintf("%s; %s", shard, benchdoc.MS(upTook)), Target: docker.ShardName(2)},
		{Measure: "`exec` in it; its shard after `down`", Result: fmt.Sprintf("answers; %s", map[bool]string{true: "removed", false: "left"}[gone]), Target: "removed"},
	}
	for _, row := range rows {
		t.Logf("FIGURE %s | %s", row.Measure, row.Result)
	}
	if os.Getenv("AIRLOCK_SOAK_RECORD") == "0" {
		return
	}
	intro := fmt.Sprintf("`make soak` (`%s`): **%s**. The shared network's shard limit at its default, `runtime.shared_network_max` = %d: "+
		"the first shard filled with started busybox containers labelled as its sandboxes are (what the daemon counts), each a port on the bridge, "+
		"then one `airlock up -d`. Machine: %s.", t.Name(), verdict, docker.DefaultSharedNetworkMax, benchdoc.Machine())
	if err := benchdoc.Write("../docs/reliability.md", "Shared network at its default limit (issue 25)", intro, rows, ""); err != nil {
		t.Errorf("cannot record the figures: %v", err)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
