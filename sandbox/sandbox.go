// Package sandbox runs sandboxes on the Docker Engine API: a dedicated network, the
// primary container with the supervisor injected as PID 1, and service containers,
// all labelled so that they can be listed and removed together.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/paths"
)

// Labels on every object of a sandbox (DESIGN §7).
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
	// labelStopTimeout is how long stop waits before SIGKILL, in seconds.
	labelStopTimeout = "dev.airlock.stop-timeout"
)

// Kinds of sandbox.
const (
	KindRun = "run"
	KindUp  = "up"
)

// Paths inside the primary container.
const (
	StateMount   = "/airlock"                    // the per-sandbox state dir
	BinMount     = "/airlock/bin"                // the injected supervisor (read-only)
	SupervisorIn = BinMount + "/airlock"         // its path
	SpecIn       = StateMount + "/spec.json"     // the supervisor spec
	SecretMount  = StateMount + "/secret"        // the host's in-memory secret dir
	SecretsIn    = SecretMount + "/secrets.json" // substituted values, deleted once read
	StatusIn     = StateMount + "/status.jsonl"
	LogsIn       = StateMount + "/daemons"
	RunMount     = StateMount + "/run" // a tmpfs: the exec environment lives here
	ExecEnvIn    = RunMount + "/env.json"
)

// ErrEngineUnreachable is returned when no Docker Engine answers.
var ErrEngineUnreachable = errors.New("cannot reach the Docker Engine")

// Error is a failure with the exit code the CLI should end with (DESIGN §9).
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
	// Binary is the static airlock binary injected as the supervisor.
	Binary string
	// BuildID identifies Binary (the supervisor volume is keyed by it).
	BuildID string
	// OnService, when set, hears each service's first result: ready, or failed
	// with why (the control daemon records service.ready / service.failed).
	OnService func(sandboxID, service string, ready bool, detail string)
	// Trace, when set, receives the duration of each step (--log-level debug).
	Trace io.Writer
	// Getenv is the host environment (for ~, $SSH_AUTH_SOCK, …).
	Getenv func(string) (string, bool)
}

// Connect returns an Engine client with API-version negotiation, after a ping.
func Connect(ctx context.Context) (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, &Error{Code: 125, Err: fmt.Errorf("%w: %v", ErrEngineUnreachable, err)}
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		cli.Close()
		return nil, &Error{Code: 125, Err: fmt.Errorf("%w at %s: %v\nstart it with `sudo ./scripts/engine.sh` (or `sudo dockerd &`), or set DOCKER_HOST", ErrEngineUnreachable, cli.DaemonHost(), err)}
	}
	cli.NegotiateAPIVersion(ctx)
	return cli, nil
}

func (rt *Runtime) notice(format string, args ...any) {
	if rt.Quiet || rt.Progress == nil {
		return
	}
	fmt.Fprintf(rt.Progress, "airlock: "+format+"\n", args...)
}

// step returns a function that traces the time since step was called.
func (rt *Runtime) step(name string) func() {
	if rt.Trace == nil {
		return func() {}
	}
	start := time.Now()
	return func() {
		fmt.Fprintf(rt.Trace, "airlock: debug: %s took %s\n", name, time.Since(start).Round(time.Millisecond))
	}
}

func (rt *Runtime) getenv(k string) string {
	if rt.Getenv == nil {
		return ""
	}
	v, _ := rt.Getenv(k)
	return v
}
