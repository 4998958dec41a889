// Package client is the public Go client of the airlock control daemon's API:
// create, inspect, list, stop, resume and delete sandboxes, run execs, and read
// their ordered event history with a sequence cursor.
package client

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"time"
)

// Sandbox states (design.md §8).
const (
	StatePending  = "pending"
	StateReady    = "ready"
	StateStopped  = "stopped"
	StateFailed   = "failed"
	StateDeleting = "deleting"
	StateDeleted  = "deleted"
)

// Sandbox kinds (CreateRequest.Kind, Sandbox.Kind): a run's sandbox ends with
// its main command; an up's stays for shells and execs.
const (
	KindRun = "run"
	KindUp  = "up"
)

// Sandbox is a sandbox record as the daemon keeps it.
type Sandbox struct {
	ID        string            `json:"id"`
	State     string            `json:"state"`
	Kind      string            `json:"kind"`
	Project   string            `json:"project"`
	Labels    map[string]string `json:"labels"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	Reason    string            `json:"reason,omitempty"`
	Daemons   DaemonCount       `json:"daemons"`
	LastSeq   uint64            `json:"last_seq"`
	Container string            `json:"container_id,omitempty"`
	// DaemonNames are the sandbox's enabled daemons, sorted.
	DaemonNames []string `json:"daemon_names,omitempty"`
	// Ports are the sandbox's published ports (sandbox.ports) as the Engine
	// bound them when it last started, while it is pending or ready.
	Ports []Port `json:"ports,omitempty"`
	// Engine is the Docker Engine the sandbox runs on.
	Engine *Engine `json:"engine,omitempty"`
	// MainExitCode is a run's main command's exit code once it exited while
	// the sandbox is still pending or ready (its daemons shutting down after a
	// fast end, its stop not yet recorded).
	MainExitCode *int `json:"main_exit_code,omitempty"`
	// Lifetime is its deadline and idle timeout, if it has them.
	Lifetime
}

// Engine says where a sandbox runs: a Docker Engine (its host and, for TCP
// with TLS, the paths of the client's certificate files on the daemon's host),
// or a Kubernetes cluster (Kubernetes set, Host empty). The daemon still reads
// a cluster packed in Host as earlier versions sent it
// ("kubernetes:///NAMESPACE?context=…"), and answers with Kubernetes.
type Engine struct {
	Context       string `json:"context,omitempty"`
	Host          string `json:"host"`
	TLSCA         string `json:"tls_ca,omitempty"`
	TLSCert       string `json:"tls_cert,omitempty"`
	TLSKey        string `json:"tls_key,omitempty"`
	TLSVerify     bool   `json:"tls_verify,omitempty"`
	SkipTLSVerify bool   `json:"skip_tls_verify,omitempty"`
	// Kubernetes names a Kubernetes cluster rather than a Docker Engine.
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
}

// Kubernetes is the cluster of a Kubernetes backend: the kubeconfig file (on
// the daemon's host) and its context, the namespace, the airlock image and
// what config.toml's [kubernetes] sets on every Pod.
type Kubernetes struct {
	Namespace       string   `json:"namespace"`
	Context         string   `json:"context,omitempty"`
	Kubeconfig      string   `json:"kubeconfig,omitempty"`
	Image           string   `json:"image,omitempty"`
	AllowPrivileged bool     `json:"allow_privileged,omitempty"`
	CreateNamespace bool     `json:"create_namespace,omitempty"`
	Pod             *KubePod `json:"pod,omitempty"`
}

// KubePod is what config.toml's [kubernetes] sets on every Pod.
type KubePod struct {
	NodeSelector     map[string]string `json:"node_selector,omitempty"`
	Tolerations      []KubeToleration  `json:"tolerations,omitempty"`
	RuntimeClassName string            `json:"runtime_class_name,omitempty"`
	ServiceAccount   string            `json:"service_account,omitempty"`
	Resources        *KubeResources    `json:"resources,omitempty"`
}

// KubeToleration is a toleration of the Pods.
type KubeToleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"`
	Seconds  *int64 `json:"toleration_seconds,omitempty"`
}

// KubeResources are the sandbox container's default requests and limits:
// Kubernetes quantities by resource name.
type KubeResources struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

// DaemonCount is how many daemons are up out of how many the sandbox declares.
type DaemonCount struct {
	Up    int `json:"up"`
	Total int `json:"total"`
}

// Port is a published port: HostIP:HostPort on the host reaches
// ContainerPort/Protocol in the sandbox.
type Port struct {
	HostIP        string `json:"host_ip"`
	HostPort      int    `json:"host_port"`
	ContainerPort int    `json:"container_port"`
	Protocol      string `json:"protocol"`
}

// String is the port as docker ps shows it: 127.0.0.1:18080->8080/tcp.
func (p Port) String() string {
	return net.JoinHostPort(p.HostIP, strconv.Itoa(p.HostPort)) + "->" + strconv.Itoa(p.ContainerPort) + "/" + p.Protocol
}

// Event is one entry of a sandbox's ordered history.
type Event struct {
	SandboxID string            `json:"sandbox_id"`
	Sequence  uint64            `json:"sequence"`
	Kind      string            `json:"kind"`
	Time      time.Time         `json:"time"`
	State     string            `json:"state"`
	Daemon    string            `json:"daemon,omitempty"`
	Service   string            `json:"service,omitempty"`
	ExecID    string            `json:"exec_id,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	Signal    string            `json:"signal,omitempty"`
	ExitCode  *int              `json:"exit_code,omitempty"`
	Attempt   int               `json:"attempt,omitempty"`
	DelayMS   *int64            `json:"delay_ms,omitempty"`
	PID       int               `json:"pid,omitempty"`
	Extra     map[string]string `json:"extra,omitempty"`
}

// CreateRequest asks the daemon for a new sandbox. Manifest is the resolved
// manifest as `airlock config --json` prints it plus where it came from; Secrets
// holds the substituted values by key path, kept in the daemon's memory only.
type CreateRequest struct {
	ID       string            `json:"id,omitempty"`
	Kind     string            `json:"kind"` // KindRun or KindUp
	Manifest *Manifest         `json:"manifest"`
	Secrets  map[string]string `json:"secrets,omitempty"`
	Command  []string          `json:"command,omitempty"`
	Env      []string          `json:"env,omitempty"`
	// EnvSecrets are -e NAME values taken from the caller's environment: they
	// reach the main command like substituted values (never in the spec or the
	// container's configuration) and are kept in the daemon's memory only.
	EnvSecrets map[string]string `json:"env_secrets,omitempty"`
	Workdir    string            `json:"workdir,omitempty"`
	TTY        bool              `json:"tty,omitempty"`
	Stdin      bool              `json:"stdin,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	// Quiet silences the supervisor's shutdown lines (the CLI's -q).
	Quiet bool `json:"quiet,omitempty"`
	// RemoveOnExit has the daemon remove the sandbox as soon as its main command
	// exited (its events recorded first), as docker run --rm does: the caller
	// gets the exit code from the Engine and need not wait for the removal.
	RemoveOnExit bool `json:"remove_on_exit,omitempty"`
	// FastEnd, for a run, ends an attach to its main command (the exit frame)
	// once the command exited and the daemons that stop within 20 ms did;
	// the others shut down in the background, recorded in events and logs.
	FastEnd bool `json:"fast_end,omitempty"`
	// Engine is the Docker Engine to create the sandbox on; nil for the daemon's own.
	Engine *Engine `json:"engine,omitempty"`
	// Start starts the sandbox once created; without it the sandbox waits in
	// state pending for Resume (so a CLI can attach before the main command runs).
	Start bool `json:"start"`
	// CLIPid and CLIStart identify the CLI process that owns a run sandbox.
	CLIPid   int    `json:"cli_pid,omitempty"`
	CLIStart string `json:"cli_start,omitempty"`
	// ClientFiles says the project dir and the [copies] sources are on the
	// caller's machine, not the daemon's: the sandbox is made as on a remote
	// Engine (project copied, host mounts refused, tools skipped) with none of
	// them copied in; the caller writes them through PUT …/files while the
	// sandbox is pending, then resumes it (start must be false).
	ClientFiles bool `json:"client_files,omitempty"`
	// ToolEnv is the caller's environment for the builtin tools' host paths
	// (GOCACHE, GOMODCACHE, GOPATH, GOROOT, PATH, UV_CACHE_DIR,
	// SSH_AUTH_SOCK): a daemon started by an earlier command plans the tools
	// with these rather than its own. Only on the daemon's own machine.
	ToolEnv map[string]string `json:"tool_env,omitempty"`
	// NoPool makes a create (run or up) start cold although its manifest has
	// a warm pool ([sandbox.pool]; airlock run --no-pool).
	NoPool bool `json:"no_pool,omitempty"`
	// ManifestSource, instead of Manifest, is a manifest the daemon resolves.
	ManifestSource
	// LifetimeRequest is the sandbox's deadline and idle timeout.
	LifetimeRequest
	// FromSnapshot, instead of a manifest, makes the sandbox of a snapshot
	// (snapshots.go).
	FromSnapshot string `json:"from_snapshot,omitempty"`
}

// ManifestSource is a manifest the daemon resolves itself, as a create, a
// prepare or a warm request may give it instead of a resolved Manifest:
// ManifestTOML (a sandbox.toml's text) or ManifestDoc (the same as a JSON
// object), with built-in presets, ${NAME} from Vars only, no vault.
// ProjectDir is its project on the daemon's host; without it the sandbox gets
// an empty project of its own. Its fields are the request's own on the wire.
type ManifestSource struct {
	ManifestTOML string            `json:"manifest_toml,omitempty"`
	ManifestDoc  json.RawMessage   `json:"manifest_doc,omitempty"`
	ProjectDir   string            `json:"project_dir,omitempty"`
	Vars         map[string]string `json:"vars,omitempty"`
}

// Manifest is a resolved manifest on the wire: manifest.Wire's fields and JSON,
// made by (*manifest.Resolved).ToWire and read back by manifest.FromWire (the
// two convert to each other).
type Manifest struct {
	File       string            `json:"file"`
	ProjectDir string            `json:"project_dir"`
	Resolved   json.RawMessage   `json:"resolved"` // manifest.Manifest with secret values blanked
	Sources    map[string]string `json:"sources,omitempty"`
}

// ResumeRequest starts a stopped (or created) sandbox again.
type ResumeRequest struct {
	Secrets map[string]string `json:"secrets,omitempty"`
}

// ExecRequest runs a command in a ready sandbox; its output goes to files.
type ExecRequest struct {
	ID      string   `json:"id,omitempty"`
	Cmd     []string `json:"cmd"`
	Env     []string `json:"env,omitempty"`
	Workdir string   `json:"workdir,omitempty"`
	// Interactive records an exec the caller runs itself (streaming straight
	// to the Engine); the caller reports its end with FinishExec.
	Interactive bool `json:"interactive,omitempty"`
	// Stdin is the command's whole standard input (base64 in JSON), for a
	// streamed exec (Accept: application/x-ndjson); without it stdin is empty.
	Stdin []byte `json:"stdin,omitempty"`
	// TTY runs the command on a terminal: an attached exec (Upgrade:
	// airlock-stream) only.
	TTY bool `json:"tty,omitempty"`
	// Shell runs the sandbox's shell (sandbox.shell, else the image's SHELL,
	// else /bin/sh), with Cmd empty.
	Shell bool `json:"shell,omitempty"`
	// Direct, with TTY, on the daemon's Unix socket, asks for the terminal's
	// stream itself (FrameDirect): keystrokes then go to the Engine with no
	// hop through the daemon. ExecAttach asks for it on its own where it can.
	Direct bool `json:"direct,omitempty"`
	// Height and Width, with TTY, are the terminal's size from the start
	// (later sizes go as resize frames).
	Height uint `json:"height,omitempty"`
	Width  uint `json:"width,omitempty"`
	// ExecControl is its timeout and whether it runs in the background.
	ExecControl
}

// AttachRequest attaches to a sandbox's main command (POST
// /v1/sandboxes/{id}/attach, a stream upgrade).
type AttachRequest struct {
	// Stdin forwards stdin frames to the main command (the sandbox must have
	// been created with stdin).
	Stdin bool `json:"stdin,omitempty"`
	// Replay sends the output from the main command's start rather than from
	// now, less the first SkipStdout and SkipStderr bytes (a client that lost
	// its stream attaching again); no stdin is forwarded then.
	Replay     bool  `json:"replay,omitempty"`
	SkipStdout int64 `json:"skip_stdout,omitempty"`
	SkipStderr int64 `json:"skip_stderr,omitempty"`
}

// CompareRequest asks whether a sandbox is what a manifest would make now
// (POST /v1/sandboxes/{id}/compare): `up` starts it again if so, else makes it anew.
type CompareRequest struct {
	Manifest *Manifest         `json:"manifest"`
	Secrets  map[string]string `json:"secrets,omitempty"`
	// Engine is the Engine or cluster the sandbox should be on (nil: the daemon's own).
	Engine *Engine `json:"engine,omitempty"`
}

// Comparison is the answer to a CompareRequest.
type Comparison struct {
	// Same: the sandbox is on that Engine, made from that manifest and the
	// images it names now.
	Same bool `json:"same"`
	// Found: that Engine holds the sandbox (else it is gone, or on another).
	Found bool `json:"found"`
}

// FinishRequest reports the end of an interactive exec.
type FinishRequest struct {
	ExitCode int `json:"exit_code"`
}

// Exec is a recorded exec.
type Exec struct {
	ID         string     `json:"id"`
	SandboxID  string     `json:"sandbox_id"`
	Cmd        []string   `json:"cmd"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Stdout     string     `json:"stdout_path"`
	Stderr     string     `json:"stderr_path"`
	// Truncated: an output file reached the daemon's limit
	// (artifacts.exec_output_max, per stream) or could not be written; it
	// ends with a line "[airlock: output truncated …]" and the rest of that
	// output was discarded.
	Truncated bool `json:"truncated"`
	// TimedOut: its timeout ended it (ExecControl.Timeout; exit code 124).
	TimedOut bool `json:"timed_out,omitempty"`
}

// Health is what the daemon says about itself.
type Health struct {
	PID     int    `json:"pid"`
	BuildID string `json:"build_id"`
	Version string `json:"version"`
	LogPath string `json:"log_path"`
	// Engines are the Docker Engines the daemon serves sandboxes on, its own first.
	Engines []string `json:"engines,omitempty"`
}

// Error reasons of the API: stable, machine-readable.
const (
	ReasonSandboxNotFound = "sandbox_not_found"
	ReasonExecNotFound    = "exec_not_found"
	ReasonIDAlreadyUsed   = "id_already_used"
	ReasonInvalidID       = "invalid_id"
	ReasonInvalidState    = "invalid_state"
	ReasonInvalidRequest  = "invalid_request"
	ReasonBadCursor       = "bad_cursor"
	ReasonUnauthorized    = "unauthorized"
	ReasonForbidden       = "forbidden" // 403: on TCP, a request a browser could have made (an Origin, a foreign Host)
	ReasonInternal        = "internal"
	ReasonConfig          = "config_error"
	ReasonEngine          = "engine_error"
	// ReasonRouteNotFound (404) and ReasonMethodNotAllowed (405): a path the
	// API does not have, a method its path does not take.
	ReasonRouteNotFound    = "route_not_found"
	ReasonMethodNotAllowed = "method_not_allowed"
)

// Error is an API error.
type Error struct {
	Status  int    `json:"-"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%s)", e.Message, e.Reason) }

// Is makes errors.Is(err, &client.Error{Reason: r}) match by reason.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason
}

// Sentinels for errors.Is.
var (
	ErrSandboxNotFound = &Error{Reason: ReasonSandboxNotFound}
	ErrIDAlreadyUsed   = &Error{Reason: ReasonIDAlreadyUsed}
	ErrInvalidState    = &Error{Reason: ReasonInvalidState}
	ErrBadCursor       = &Error{Reason: ReasonBadCursor}
)
