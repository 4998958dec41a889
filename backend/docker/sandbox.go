// Package sandbox runs sandboxes on the Docker Engine API: a dedicated network, the
// primary container with the supervisor injected as PID 1, and service containers,
// all labelled so that they can be listed and removed together.
package docker

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/engine/dial"
	"github.com/airlock-dev/airlock/paths"
)

// Labels on every object of a sandbox (design.md §7).
const (
	LabelSandbox  = "dev.airlock.sandbox"
	LabelProject  = "dev.airlock.project"
	LabelPlanHash = "dev.airlock.plan-hash"
	// LabelRole is primary, service or helper.
	LabelRole = "dev.airlock.role"
	// LabelService names a service container's service.
	LabelService = "dev.airlock.service"
	// LabelKind is run or up.
	LabelKind = "dev.airlock.kind"
	// LabelDaemons counts the enabled daemons of the primary.
	LabelDaemons = "dev.airlock.daemons"
	// LabelCLIPid and LabelCLIStart identify the CLI process that owns a run sandbox.
	LabelCLIPid   = "dev.airlock.cli-pid"
	LabelCLIStart = "dev.airlock.cli-start"
	// LabelOwner carries the instance key of the control daemon that made the
	// object: a daemon touches only its own (and, for a sandbox in its store,
	// objects made before owners were recorded).
	LabelOwner = "dev.airlock.owner"
	// LabelStopTimeout is how long stop waits before SIGKILL, in seconds.
	LabelStopTimeout = "dev.airlock.stop-timeout"
	// LabelUser, on a primary that runs as root so that its supervisor can
	// start daemons as other users, is the sandbox user (main, exec, shell,
	// and the owner of what the files API writes).
	LabelUser = "dev.airlock.user"
)

// Kinds of sandbox.
const (
	KindRun = "run"
	KindUp  = "up"
)

// Paths inside the primary container. Nothing of airlock's host state is mounted
// into a sandbox (design.md §7): the spec is uploaded through the Engine API, the
// status stream and daemon logs live in the container's own filesystem (the
// state dir, whose layout supervisor/layout.go gives: supervisor.StateDir,
// StatusFile, DaemonLogFile) and are read through the API, and secret values
// are delivered to a socket on a tmpfs.
const (
	AirlockIn    = "/airlock"
	BinMount     = AirlockIn + "/bin"       // the injected supervisor volume (read-only)
	SupervisorIn = BinMount + "/airlock"    // its path
	SpecIn       = AirlockIn + "/spec.json" // the supervisor spec (uploaded, holds no secret)
	RunMount     = AirlockIn + "/run"       // a tmpfs: secrets socket and exec environment
	ExecEnvIn    = RunMount + "/env.json"
	// SecretsSocketIn is where PID 1 (or a service's wrapper) waits for its values.
	SecretsSocketIn = RunMount + "/secrets.sock"
	// StatusReadIn is where the daemon's follower reports how much of the status
	// stream it read; the supervisor waits for it at exit.
	StatusReadIn = RunMount + "/status.read"
)

// ErrEngineUnreachable is returned when no Docker Engine answers.
var ErrEngineUnreachable = engine.ErrUnreachable

// Error is a failure with the exit code the CLI should end with (design.md §9).
type Error struct {
	Code int // 2 config, 125 airlock or the sandbox failed
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func failed(format string, args ...any) error {
	return &Error{Code: 125, Err: fmt.Errorf(format, args...)}
}

func configErr(format string, args ...any) error {
	return &Error{Code: 2, Err: fmt.Errorf(format, args...)}
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

	// hostPIDs is set once the Engine's container PIDs are proven to be
	// this host's (seesEnginePIDs).
	hostPIDs atomic.Bool

	shared  sharedNet
	arch    engineArch
	product engineProduct
	limits  engineLimits
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
		return nil, ep, &Error{Code: 125, Err: fmt.Errorf("cannot choose the Docker Engine: %w", err)}
	}
	cli, err := dial.Connect(ctx, ep)
	if err != nil {
		return nil, ep, &Error{Code: 125, Err: err}
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

func (rt *Runtime) getenv(k string) string {
	if rt.Getenv == nil {
		return ""
	}
	v, _ := rt.Getenv(k)
	return v
}
