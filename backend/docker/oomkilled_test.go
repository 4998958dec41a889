package docker

import (
	"context"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// oomEngine answers ContainerInspect for a stopped container (exit 137).
// Every other call panics.
type oomEngine struct {
	client.APIClient
	memory   int64
	oom      bool
	inspects int
}

func (e *oomEngine) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	e.inspects++
	return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{
		State:      &container.State{Status: container.StateExited, ExitCode: 137, OOMKilled: e.oom},
		HostConfig: &container.HostConfig{Resources: container.Resources{Memory: e.memory}},
	}}, nil
}

// TestOOMKilledSaysLimited: the backend answers from one inspect whether the
// Engine flagged an OOM kill and whether the container has a memory limit
// (the daemon waits for a late kill event only for one that has).
func TestOOMKilledSaysLimited(t *testing.T) {
	for _, c := range []struct {
		memory          int64
		oom             bool
		killed, limited bool
	}{{32 << 20, true, true, true}, {32 << 20, false, false, true}, {0, false, false, false}} {
		e := &oomEngine{memory: c.memory, oom: c.oom}
		killed, limited := (&Runtime{Engine: e}).OOMKilled(context.Background(), "c")
		if killed != c.killed || limited != c.limited || e.inspects != 1 {
			t.Errorf("memory %d, flag %v: killed %v limited %v after %d inspects; want %v %v after 1", c.memory, c.oom, killed, limited, e.inspects, c.killed, c.limited)
		}
	}
}
