// Package docker runs sandboxes on the Docker Engine API: a dedicated network, the
// primary container with the supervisor injected as PID 1, and service containers,
// all labelled so that they can be listed and removed together. Its Runtime is a
// backend.Backend; the types it speaks are package backend's.
package docker

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/docker/sharednet"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/engine/dial"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/paths"
)

// ErrEngineUnreachable is returned when no Docker Engine answers.
var ErrEngineUnreachable = engine.ErrUnreachable

func failed(format string, args ...any) error {
	return &backend.Error{Code: 125, Err: fmt.Errorf(format, args...)}
}

func configErr(format string, args ...any) error {
	return &backend.Error{Code: 2, Err: fmt.Errorf(format, args...)}
}

// sandboxState is the Docker backend's own state of a sandbox (its
// backend.Sandbox's Own).
type sandboxState struct {
	manifest         *manifest.Resolved
	supervisorVolume string
	fresh            bool // created by this runtime and never started: its status stream is empty
	envSecrets       map[string]string
	shard            string // the shard of the Engine's shared airlock network it is on, when not on one of its own
	egressID         string // the egress proxy container, when the sandbox has egress rules
	egressDNS        string // the proxy's address on the sandbox network, its containers' DNS server
	parked           bool   // made for a warm pool: its values come with its claim (Claim), not at Start
	hold             bool   // its supervisor holds until Start released it (LabelHold)

	// A parked sandbox's claim goes to its supervisor's stdin through the
	// attach to its main command (Attach keeps it), whose stdin, when the
	// client forwards one, follows the claim (Claim).
	claimMu    sync.Mutex
	claimConn  *types.HijackedResponse
	claimStdin io.Reader
}

// ownState is sb's state; a handle made without the runtime (backend.Handle, a
// test's) gets an empty one.
func ownState(sb *backend.Sandbox) *sandboxState {
	if st, ok := sb.Own.(*sandboxState); ok {
		return st
	}
	st := &sandboxState{}
	sb.Own = st
	return st
}

// Runtime creates and drives sandboxes.
type Runtime struct {
	Engine client.APIClient
	Paths  *paths.Paths
	// Progress receives pull and build progress and notices (the CLI's stderr).
	Progress io.Writer
	// ProgressTTY draws progress for a terminal rather than as plain lines.
	ProgressTTY bool
	Quiet       bool
	// Binary is the static airlock binary injected as the supervisor when
	// FindSupervisor is nil; it must be a Linux binary for the Engine's
	// architecture (supervisor_bin.go).
	Binary string
	// BuildID identifies Binary (the supervisor volume is keyed by it).
	BuildID string
	// FindSupervisor, when set, returns the supervisor to inject on an Engine
	// of a CPU architecture ("amd64", "arm64": Go's names), for the CLI and
	// daemon: the binaries make build embeds, or their own executable.
	FindSupervisor func(arch string) (*Supervisor, error)
	// OnService, when set, hears each service's first result: ready, or failed
	// with why (the control daemon records service.ready / service.failed).
	OnService func(sandboxID, service string, ready bool, detail string)
	// Trace, when set, receives the duration of each step (--log-level debug).
	Trace io.Writer
	// OnStep, when set, hears the duration of each step of a sandbox's create,
	// start and removal (the daemon records them with the sandbox's events).
	OnStep func(sandboxID, step string, d time.Duration)
	// Getenv is the host environment (for ~, $SSH_AUTH_SOCK, …).
	Getenv func(string) (string, bool)
	// Remote says the Engine cannot see this host's files: the project is
	// copied in (sandbox.project = "auto"), host mounts are config errors and
	// tools are skipped. EngineName names the Engine in messages.
	Remote     bool
	EngineName string
	// Endpoint is how the Engine was reached (the daemon opens the same one).
	Endpoint engine.Endpoint
	// Owner is the control daemon's instance key, put on every object made and
	// required of every object listed or removed ("" for none: tests, tools).
	Owner string
	// SharedNetworkMax is how many sandboxes one shard of the shared network
	// holds (runtime.shared_network_max; 0: DefaultSharedNetworkMax).
	SharedNetworkMax int

	// What the runtime's jobs learn of the Engine and keep (each job is made
	// for a call from the fields above, and holds its part of these):
	// hostPIDs is set once the Engine's container PIDs are proven to be this
	// host's (enginePIDs), procsAt where its containers' cgroups list their
	// processes (procsPlace); shared is what is known of the shared network's
	// shards (sharednet); facts what the Engine is (engineKind).
	hostPIDs atomic.Bool
	procsAt  procsPlace
	// recent are the images the last prepares found (recentImages).
	recent recentImages
	shared sharednet.State
	facts  engineFacts
	// warmed is what parked sandboxes opened for their claim (cmdchannel.go).
	warmed warmSet
	// egress are the daemon's shared egress proxies (egresshub.go).
	egress egressHubs
}

// NewRuntime returns a runtime for the Engine at ep, over an open client.
func NewRuntime(ep engine.Endpoint, cli client.APIClient, p *paths.Paths) *Runtime {
	return &Runtime{Engine: cli, Paths: p, Endpoint: ep, Remote: !ep.Local(), EngineName: ep.String()}
}

// Connect returns a client of the Engine the docker CLI would use (DOCKER_HOST,
// DOCKER_CONTEXT, the current context), with API-version negotiation, after a ping.
func Connect(ctx context.Context, getenv func(string) (string, bool)) (*client.Client, engine.Endpoint, error) {
	ep, err := engine.Resolve(getenv)
	if err != nil {
		return nil, ep, &backend.Error{Code: 125, Err: fmt.Errorf("cannot choose the Docker Engine: %w", err)}
	}
	cli, err := dial.Connect(ctx, ep)
	if err != nil {
		return nil, ep, &backend.Error{Code: 125, Err: err}
	}
	return cli, ep, nil
}

func (rt *Runtime) notice(format string, args ...any) {
	if rt.Quiet || rt.Progress == nil {
		return
	}
	fmt.Fprintf(rt.Progress, "airlock: "+format+"\n", args...)
}

// step returns a function that traces the time since step was called.
func (rt *Runtime) step(id, name string) func() {
	if rt.Trace == nil && rt.OnStep == nil {
		return func() {}
	}
	start := time.Now()
	return func() {
		d := time.Since(start)
		if rt.Trace != nil {
			fmt.Fprintf(rt.Trace, "airlock: debug: %s took %s\n", name, d.Round(time.Millisecond))
		}
		if rt.OnStep != nil {
			rt.OnStep(id, name, d)
		}
	}
}

// lookupEnv is getenv's value of k ("" when unset, or without getenv).
func lookupEnv(getenv func(string) (string, bool), k string) string {
	if getenv == nil {
		return ""
	}
	v, _ := getenv(k)
	return v
}
