package docker

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// lateOOMEngine answers ContainerInspect for a stopped container (exit 137)
// whose OOMKilled flag the Engine sets only from its afterInspects'th answer
// on: Engine 20.10 learns of the kill after the exit. Every other call panics.
type lateOOMEngine struct {
	client.APIClient
	memory        int64
	afterInspects int32
	inspects      atomic.Int32
}

func (e *lateOOMEngine) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	n := e.inspects.Add(1)
	return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{
		State:      &container.State{Status: container.StateExited, ExitCode: 137, OOMKilled: n >= e.afterInspects},
		HostConfig: &container.HostConfig{Resources: container.Resources{Memory: e.memory}},
	}}, nil
}

// TestOOMKilledWaitsForALateFlag: a container with a memory limit whose
// OOMKilled flag comes after its exit is reported killed for memory (it was
// reported a plain exit 137: an OOM-killed sandbox recorded "stopped"); one
// without a limit is answered from one inspect.
func TestOOMKilledWaitsForALateFlag(t *testing.T) {
	late := &lateOOMEngine{memory: 32 << 20, afterInspects: 3}
	if !(&Runtime{Engine: late}).OOMKilled(context.Background(), "c") {
		t.Errorf("a memory-limited container whose OOM flag came on the 3rd inspect: not OOM-killed (%d inspects)", late.inspects.Load())
	}
	never := &lateOOMEngine{afterInspects: 1 << 30}
	if (&Runtime{Engine: never}).OOMKilled(context.Background(), "c") || never.inspects.Load() != 1 {
		t.Errorf("a container without a memory limit: OOM-killed, or inspected %d times (want once)", never.inspects.Load())
	}
}
