package docker

import (
	"context"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// inspectEngine answers ContainerInspect with one state; every other call panics.
type inspectEngine struct {
	client.APIClient
	state       *container.State
	healthcheck *container.HealthConfig
}

func (e *inspectEngine) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	return container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{State: e.state},
		Config:            &container.Config{Healthcheck: e.healthcheck},
	}, nil
}

// TestServiceWatchHealthOfEngines: a running service without a healthcheck is
// ready whether the Engine leaves State.Health out (Docker) or sends an empty one
// (Podman 4.3's Docker-compatible API: {"Status": "", "FailingStreak": 0}); one
// with a healthcheck waits for "healthy" on both.
func TestServiceWatchHealthOfEngines(t *testing.T) {
	running := func(h *container.Health) *container.State {
		return &container.State{Status: container.StateRunning, Running: true, Health: h}
	}
	probe := &container.HealthConfig{Test: []string{"CMD", "true"}}
	for _, c := range []struct {
		name        string
		state       *container.State
		healthcheck *container.HealthConfig
		want        serviceState
	}{
		{"docker, no healthcheck", running(nil), nil, serviceReady},
		{"podman, no healthcheck", running(&container.Health{}), nil, serviceReady},
		{"docker none", running(&container.Health{Status: container.NoHealthcheck}), nil, serviceReady},
		{"starting", running(&container.Health{Status: container.Starting}), probe, servicePending},
		{"healthy", running(&container.Health{Status: container.Healthy}), probe, serviceReady},
		{"podman, healthcheck not run yet", running(&container.Health{}), probe, servicePending},
		{"unhealthy", running(&container.Health{Status: container.Unhealthy, FailingStreak: 3}), probe, serviceFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &serviceWatch{svc: &services{engine: &inspectEngine{state: c.state, healthcheck: c.healthcheck}}, name: "svc", id: "c1"}
			got, reason, err := w.check(context.Background())
			if err != nil || got != c.want {
				t.Errorf("check = %v (%q, %v); want %v", got, reason, err, c.want)
			}
		})
	}
}
