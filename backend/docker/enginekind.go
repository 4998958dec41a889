package docker

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/manifest"
)

// Podman's Docker-compatible service (podman system service) runs airlock's
// sandboxes, but its networks (netavark) lack two driver options airlock relies
// on (docs/engines.md#podman):
//   - com.docker.network.bridge.enable_icc=false: the containers of one network
//     always reach each other, so sandboxes cannot share one there. Nor does a
//     network of each sandbox's own keep them apart: the Docker-compatible API
//     makes every bridge network with netavark's isolate option, but netavark
//     1.4 removes the FORWARD rule that applies isolation (-j
//     NETAVARK_ISOLATION_1) whenever any isolated network is torn down (the
//     last container on it stops), until the next one is set up, so sandboxes
//     reach each other after any other sandbox stops. sandbox.network =
//     "bridge" is refused there (bridgeSupported);
//   - com.docker.network.bridge.inhibit_ipv4: the bridge of an internal network
//     keeps its address, so a sandbox with egress rules would reach every listener
//     of the host through it; and a container's DNS server replaces, rather than
//     backs, the resolver that knows the sandbox's containers. [sandbox.egress] is
//     refused there.

// engineFacts is what a runtime learned of its Engine, asked once each: its
// architecture, whether it is Podman, whether it applies limits. Its zero
// value is ready.
type engineFacts struct {
	arch    engineArch
	product engineProduct
	limits  engineLimits
}

// engineKind answers what kind of Engine it is and what it supports: the
// Engine, its name for messages, and what was learned of it (facts).
type engineKind struct {
	engine client.APIClient
	name   string
	facts  *engineFacts
}

// kind is the runtime's Engine and what it learned of it.
func (rt *Runtime) kind() engineKind {
	return engineKind{engine: rt.Engine, name: rt.EngineName, facts: &rt.facts}
}

// engineArch caches the Engine's architecture.
type engineArch struct {
	mu   sync.Mutex
	arch string
}

// arch is the Engine's CPU architecture as Go names it ("amd64", "arm64"),
// from its Info; an Engine that does not run Linux containers is an error.
func (k engineKind) arch(ctx context.Context) (string, error) {
	a := &k.facts.arch
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.arch != "" {
		return a.arch, nil
	}
	info, err := k.engine.Info(ctx)
	if err != nil {
		return "", failed("cannot ask the Engine%s for its architecture: %v", k.suffix(), err)
	}
	if info.OSType != "" && info.OSType != "linux" {
		return "", failed("the Engine%s runs %s containers; airlock needs an Engine that runs Linux containers", k.suffix(), info.OSType)
	}
	if info.Architecture == "" {
		return "", failed("the Engine%s does not say its architecture", k.suffix())
	}
	a.arch = GoArch(info.Architecture)
	return a.arch, nil
}

// suffix names the Engine in a message (" at NAME"; "" without a name).
func (k engineKind) suffix() string {
	if k.name == "" {
		return ""
	}
	return " at " + k.name
}

// engineProduct remembers whether the Engine is Podman.
type engineProduct struct {
	mu     sync.Mutex
	known  bool
	podman string // "Podman 4.3.1"; "" for another Engine
}

// podman returns "Podman <version>" when the Engine is Podman's Docker-compatible
// service (its version lists a "Podman Engine" component), else "". It asks the
// Engine once.
func (k engineKind) podman(ctx context.Context) (string, error) {
	p := &k.facts.product
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known {
		return p.podman, nil
	}
	v, err := k.engine.ServerVersion(ctx)
	if err != nil {
		return "", failed("cannot ask the Engine%s for its version: %v", k.suffix(), err)
	}
	for _, c := range v.Components {
		if c.Name == "Podman Engine" {
			p.podman = "Podman " + c.Version
		}
	}
	p.known = true
	return p.podman, nil
}

// egressSupported fails when the Engine cannot keep a sandbox with egress rules
// from reaching the host and names beside its proxy.
func (k engineKind) egressSupported(ctx context.Context) error {
	p, err := k.podman(ctx)
	if err != nil || p == "" {
		return err
	}
	return failed("cannot apply sandbox.egress: the Engine (%s) does not support it: its networks ignore "+
		"com.docker.network.bridge.inhibit_ipv4 (the sandbox would reach the host through its bridge) and a "+
		"container's DNS server replaces the resolver of the sandbox's own names; use a Docker Engine, or remove [sandbox.egress]", p)
}

// bridgeSupported fails when the Engine cannot keep a sandbox on a bridge
// network from reaching the other sandboxes (Podman: see above).
func (k engineKind) bridgeSupported(ctx context.Context) error {
	p, err := k.podman(ctx)
	if err != nil || p == "" {
		return err
	}
	return failed("cannot keep the sandbox apart from other sandboxes on its network (sandbox.network = \"bridge\"): "+
		"the Engine (%s) does not: the containers of one of its networks always reach each other (it ignores "+
		"com.docker.network.bridge.enable_icc), and netavark lifts the isolation between its networks whenever one of them "+
		"is torn down (its last container stops); use a Docker Engine, or sandbox.network = \"none\"", p)
}

// engineLimits remembers whether the Engine applies memory and CPU limits.
type engineLimits struct {
	mu          sync.Mutex
	known       bool
	memory, cpu bool
	what        string // "rootless, cgroup driver none": for messages
}

// limitsSupported fails when the manifest asks for a memory or CPU limit the
// Engine says it does not apply (rootless Docker on cgroup v1 takes them
// and applies nothing): a limit a user declared is never silently dropped.
// It asks the Engine once, and only when a limit is asked for.
func (k engineKind) limitsSupported(ctx context.Context, r *manifest.Resolved) error {
	if r.Sandbox.Memory == "" && r.Sandbox.CPUs <= 0 {
		return nil
	}
	l := &k.facts.limits
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.known {
		info, err := k.engine.Info(ctx)
		if err != nil {
			return failed("cannot ask the Engine%s what it supports: %v", k.suffix(), err)
		}
		l.memory, l.cpu = info.MemoryLimit, info.CPUCfsQuota
		var what []string
		if slices.ContainsFunc(info.SecurityOptions, func(o string) bool { return strings.Contains(o, "name=rootless") }) {
			what = append(what, "rootless")
		}
		what = append(what, "cgroup driver "+info.CgroupDriver)
		l.what, l.known = strings.Join(what, ", "), true
	}
	switch {
	case r.Sandbox.Memory != "" && !l.memory:
		return failed("cannot apply sandbox.memory: the Engine (%s) does not apply memory limits (its cgroups are not delegated to it); remove sandbox.memory for this Engine, or use one that applies it", l.what)
	case r.Sandbox.CPUs > 0 && !l.cpu:
		return failed("cannot apply sandbox.cpus: the Engine (%s) does not apply CPU limits (its cgroups are not delegated to it); remove sandbox.cpus for this Engine, or use one that applies it", l.what)
	}
	return nil
}
