// Package daemon assembles the control daemon: the backend of each Engine or
// cluster (the Docker Engine's docker.Runtime, the Kubernetes backend), the
// supervisor binary injected into sandboxes, the store and control.Service,
// and runs it on its socket (and TCP listener) until it is told to stop.
// cmd/airlock hands Main to the command line for `airlock daemon run`; the
// command line itself never imports it.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/term"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/daemonfiles"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/engine/dial"
	"github.com/airlock-dev/airlock/internal/exitcode"
	"github.com/airlock-dev/airlock/mcpserver"
	"github.com/airlock-dev/airlock/secrets"
	"github.com/airlock-dev/airlock/userconfig"
)

// Options are what Main runs the daemon with.
type Options = daemonfiles.Run

// assembly is what the parts of one daemon share.
type assembly struct {
	getenv  func(string) (string, bool)
	buildID string
}

// Main runs the daemon in the foreground until ctx ends (the command line
// ends it on SIGTERM and SIGINT). The runtime and daemon dirs are the user's
// own already. Its errors carry their exit code (internal/exitcode).
func Main(ctx context.Context, o Options) error {
	p := o.Paths
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	home, _ := getenv("HOME")
	cfg, err := userconfig.LoadWithHome(p.UserConfig(), home)
	if err != nil {
		return exitcode.Config(err)
	}
	level := daemonLogLevel(cfg.Runtime.LogLevel, o.LogLevel != "", o.LogLevel)
	d := &assembly{getenv: getenv, buildID: o.BuildID}
	cli, ep, err := docker.Connect(ctx, getenv)
	if err != nil {
		return exitcode.OfSandbox(err)
	}
	defer cli.Close()
	rt := docker.NewRuntime(ep, cli, p)
	if rt.Owner, err = control.OwnerKey(p); err != nil {
		return exitcode.With(exitcode.Airlock, err)
	}
	// The supervisor is chosen per Engine, for its architecture (supervisor.go).
	rt.ProgressTTY = isTerminal(o.Stderr)
	rt.Quiet, rt.FindSupervisor, rt.BuildID, rt.Getenv = true, d.findSupervisor, o.BuildID, getenv
	if o.LogLevel == "debug" {
		rt.Trace = o.Stderr
	}
	rt.SharedNetworkMax = cfg.Runtime.SharedNetworkMax
	// Sandboxes created on another Engine (DOCKER_HOST, a docker context) are
	// served on it.
	openEngine := func(ep engine.Endpoint) (backend.Backend, error) {
		if ep.IsKubernetes() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return openBackend(ctx, ep, rt.Owner)
		}
		cli, err := dial.Open(ep)
		if err != nil {
			return nil, err
		}
		ort := docker.NewRuntime(ep, cli, p)
		ort.Binary, ort.FindSupervisor, ort.BuildID, ort.Getenv, ort.Quiet, ort.Owner = rt.Binary, rt.FindSupervisor, rt.BuildID, rt.Getenv, true, rt.Owner
		ort.SharedNetworkMax = rt.SharedNetworkMax
		return ort, nil
	}
	redactor := secrets.NewRedactor()
	openService := func() (*control.Service, error) {
		st, err := store.Open(p.Store())
		if err != nil {
			return nil, err
		}
		return control.NewService(st, rt, control.Config{
			IdleTTL: cfg.Runtime.IdleTTL, EventRetentionTTL: cfg.Runtime.EventRetentionTTL,
			BuildContextDir: filepath.Join(p.DaemonDir(), "build-contexts"), ExecOutputRoot: cfg.ExecOutputRoot(p), ExecOutputTemplate: cfg.Artifacts.ExecOutputTemplate, ExecOutputMax: cfg.Artifacts.ExecOutputMax,
			OutputMax: cfg.Artifacts.OutputMax, Redactor: redactor, OpenEngine: openEngine, PoolMax: cfg.Runtime.PoolMax,
			CreatesPerEngine: cfg.Runtime.CreatesPerEngine,
		}), nil
	}
	logCopy := o.Stderr
	if v, _ := getenv("AIRLOCK_DAEMON_BACKGROUND"); v == "1" {
		logCopy = nil // stderr is the log file already
	} else if o.NoToken && o.Host != "" && o.Stderr != nil {
		fmt.Fprintf(o.Stderr, "airlock: warning: %s\n", daemonfiles.TokenlessWarning(o.Host, o.Port))
	}
	err = control.Run(ctx, control.Options{
		Paths: p, Version: o.Version, BuildID: o.BuildID, Host: o.Host, Port: o.Port, Token: o.Token, TokenFile: o.TokenFile, NoToken: o.NoToken,
		TLSCert: o.TLSCert, TLSKey: o.TLSKey,
		LogLevel: level, Stderr: logCopy, Service: openService, Redactor: redactor,
		// The MCP server at /v1/mcp calls the API on the daemon's own socket:
		// the one door, behind the listener's checks the request passed.
		MCP: mcpserver.Handler(mcpserver.New(mcpserver.Options{Client: client.New(p.Socket()), Version: o.Version, ProjectsHere: true})),
	})
	// The networks parked for sandboxes behind egress rules are the
	// daemon's: they go with it (docs/egress.md).
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	rt.CloseEgress(cctx)
	ccancel()
	if errors.Is(err, control.ErrAlreadyRunning) {
		return exitcode.With(exitcode.Failure, err)
	}
	if err != nil {
		return exitcode.With(exitcode.Airlock, err)
	}
	return nil
}

// daemonLogLevel is the daemon's log level: --log-level when given on its command
// line, else config.toml's runtime.log_level.
func daemonLogLevel(config string, flagSet bool, flag string) string {
	if flagSet {
		return flag
	}
	return config
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
