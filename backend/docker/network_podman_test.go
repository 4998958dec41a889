package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// networkEngine records the networks made; it knows none, and no container.
type networkEngine struct {
	versionEngine
	made map[string]network.CreateOptions
}

func (e *networkEngine) NetworkCreate(_ context.Context, name string, o network.CreateOptions) (network.CreateResponse, error) {
	if e.made == nil {
		e.made = map[string]network.CreateOptions{}
	}
	e.made[name] = o
	return network.CreateResponse{ID: "id-" + name}, nil
}

func (e *networkEngine) NetworkList(_ context.Context, o network.ListOptions) ([]network.Summary, error) {
	var out []network.Summary
	for name := range e.made {
		if o.Filters.Contains("name") && !o.Filters.ExactMatch("name", name) {
			continue
		}
		out = append(out, network.Summary{Name: name, ID: "id-" + name})
	}
	return out, nil
}

func (e *networkEngine) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	return nil, nil
}

// TestBridgeNetworkOfEngines: on Docker a sandbox without services joins the
// shared network (inter-container communication off) and one with services
// gets a network of its own, labelled with the sandbox (so that its removal
// takes it). On Podman, whose networks cannot keep sandboxes apart (its
// networks ignore enable_icc, and netavark lifts the isolation between networks
// whenever one is torn down), sandbox.network = "bridge" is refused, saying
// why, before any network is made.
func TestBridgeNetworkOfEngines(t *testing.T) {
	docker := types.Version{Components: []types.ComponentVersion{{Name: "Engine", Version: "20.10.24"}}}
	podman := types.Version{Components: []types.ComponentVersion{{Name: "Podman Engine", Version: "4.3.1"}}}
	plain := &manifest.Resolved{}
	plain.Sandbox.Network = "bridge"
	withServices := &manifest.Resolved{}
	withServices.Sandbox.Network = "bridge"
	withServices.Services = map[string]manifest.Service{"db": {Image: "busybox"}}
	labels := map[string]string{backend.LabelSandbox: "abc", backend.LabelProject: "/p"}

	for _, c := range []struct {
		engine   string
		v        types.Version
		r        *manifest.Resolved
		wantMade string // "" for none (refused)
	}{
		{"Docker", docker, plain, SharedNetwork},
		{"Docker", docker, withServices, "airlock-abc"},
		{"Podman", podman, plain, ""},
		{"Podman", podman, withServices, ""},
	} {
		what := fmt.Sprintf("%s, %d services", c.engine, len(c.r.Services))
		eng := &networkEngine{versionEngine: versionEngine{v: c.v}}
		rt := &Runtime{Engine: eng}
		sb := &backend.Sandbox{ID: "abc", Name: "airlock-abc"}
		reserved, err := bridgeNetwork(context.Background(), rt.kind(), rt.shards(), sb, c.r, labels)
		if c.wantMade == "" {
			var e *backend.Error
			if !errors.As(err, &e) || e.Code != 125 {
				t.Errorf("%s: error %v; want a refusal (125)", what, err)
			}
			for _, want := range []string{"cannot keep the sandbox apart from other sandboxes", "the Engine (Podman 4.3.1) does not", "enable_icc", "isolation between its networks", `sandbox.network = "none"`} {
				if err != nil && !strings.Contains(err.Error(), want) {
					t.Errorf("%s: error %q lacks %q", what, err, want)
				}
			}
			if len(eng.made) != 0 || sb.Network != "" {
				t.Errorf("%s: refused, yet networks made %v, sandbox on %q", what, eng.made, sb.Network)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		reserved()
		o, ok := eng.made[c.wantMade]
		if !ok || len(eng.made) != 1 {
			t.Errorf("%s: networks made %v; want %s alone", what, eng.made, c.wantMade)
			continue
		}
		if o.Driver != "bridge" {
			t.Errorf("%s: network %s driver %q; want bridge", what, c.wantMade, o.Driver)
		}
		if c.wantMade == SharedNetwork {
			if o.Options["com.docker.network.bridge.enable_icc"] != "false" || o.Labels[LabelShared] != "true" || o.Labels[backend.LabelSandbox] != "" {
				t.Errorf("%s: shared network options %v, labels %v", what, o.Options, o.Labels)
			}
			if sb.Network != "id-"+SharedNetwork || ownState(sb).shard != SharedNetwork {
				t.Errorf("%s: sandbox on %q (shard %q); want the shared network", what, sb.Network, ownState(sb).shard)
			}
			continue
		}
		if o.Labels[backend.LabelSandbox] != "abc" || o.Labels[backend.LabelProject] != "/p" || o.Labels[backend.LabelRole] != "network" || o.Labels[LabelShared] != "" {
			t.Errorf("%s: network %s labels %v; want the sandbox's, role network", what, c.wantMade, o.Labels)
		}
		if sb.Network != "airlock-abc" || ownState(sb).shard != "" {
			t.Errorf("%s: sandbox on %q (shard %q); want its own network airlock-abc", what, sb.Network, ownState(sb).shard)
		}
	}
}
