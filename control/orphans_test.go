package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/client"
)

// TestReaperRemovesWhatADeletedRunLeft: a container labelled as a run
// sandbox's that the store records as deleted (the Engine finished a create
// whose daemon was killed, and the CLI had the sandbox removed and made again)
// is removed by the reaper, whatever its CLI does.
func TestReaperRemovesWhatADeletedRunLeft(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: binA, BuildID: buildA, Getenv: e.getenv, Owner: randHex(16)}
	c := startInProcess(t, e, rt)
	tctx := ctxT(t, 2*time.Minute)
	req := e.upRequest("")
	req.Kind, req.Command, req.Start = "run", []string{"sleep", "300"}, false
	sb, err := c.Create(tctx, req)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, sb.ID, 30*time.Second, client.StatePending)
	var labels map[string]string
	eventually(t, 30*time.Second, "the run's container", func() bool {
		list, err := e.docker.ContainerList(tctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", backend.LabelSandbox+"="+sb.ID))})
		if err == nil && len(list) > 0 {
			labels = list[0].Labels
		}
		return labels != nil
	})
	if _, err := c.Delete(tctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, sb.ID, 30*time.Second, client.StateDeleted)

	// What the Engine made after the removal, as a killed daemon's create.
	made, err := e.docker.ContainerCreate(tctx, &container.Config{Image: e.image, Cmd: []string{"sleep", "300"}, Labels: labels}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.docker.ContainerRemove(context.Background(), made.ID, container.RemoveOptions{Force: true})
	})
	eventually(t, 30*time.Second, "the reaper to remove the deleted run's container", func() bool {
		_, err := e.docker.ContainerInspect(tctx, made.ID)
		return err != nil
	})
}
