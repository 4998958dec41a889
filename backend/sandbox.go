package backend

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/airlock-dev/airlock/manifest"
)

// A sandbox as the daemon asks for it, holds it and sees it listed.

// Request asks for a new sandbox.
type Request struct {
	ID       string // "" for a new UUIDv4
	Manifest *manifest.Resolved
	Kind     string   // KindRun or KindUp
	Command  []string // the main command (run); nil for an up sandbox, whose main process idles
	Env      []string // K=V from -e, over [env]
	// EnvSecrets are -e NAME values from the caller's environment, over [env]
	// and Env: delivered like substituted values, never written in the spec.
	EnvSecrets map[string]string
	Workdir    string // -w, over sandbox.workdir
	TTY        bool   // allocate a terminal for the main command
	Stdin      bool   // keep stdin open for the main command
	Labels     map[string]string
	Quiet      bool // no shutdown lines from the supervisor
	// CLIPid and CLIStart identify the CLI process of a run sandbox, for the reaper.
	CLIPid   int
	CLIStart string
	// KeepFiles says the sandbox's files are read after its main command
	// exited (run --output, --keep): a backend whose stopped containers cannot
	// be read (Kubernetes) keeps them readable until the sandbox is removed.
	KeepFiles bool
	// ClientFiles says the project and the [copies] sources are on the
	// client's machine, not this one: the sandbox is made as on a remote Engine
	// (the project copied, host mounts refused, tools skipped) and nothing is
	// copied in; the client writes the project and copies through the files
	// API before the start.
	ClientFiles bool
	// ToolEnv is the caller's environment for the builtin tools' host paths,
	// over the runtime's own (Getenv): GOCACHE=/tmp/x on the command line
	// of a run counts although the daemon was started before.
	ToolEnv map[string]string
	// EndMarker, for a run, is the nonce of the marker the supervisor writes
	// after the main command's output (supervisor.Spec.EndMarker): a reader of
	// the output has the code then, while slow daemons still shut down.
	EndMarker string
	// Park makes the sandbox for a warm pool: started in advance, its
	// supervisor starts what takes no run-time value and waits for a Claim
	// (Command, Env, Workdir, TTY and Stdin are the claim's, not the
	// request's). PoolKey is its pool's key (LabelPool).
	Park    bool
	PoolKey string
	// FromSnapshot: the manifest's images are a snapshot's (snapshot.go),
	// which hold the project and the [copies] entries as the sandbox left
	// them: a copied project and the copies are not copied in again.
	FromSnapshot bool
}

// Sandbox is a created sandbox.
type Sandbox struct {
	ID        string
	Name      string
	Project   string
	Kind      string
	PlanHash  string
	Network   string // "" when the sandbox has no network of its own
	PrimaryID string
	Services  map[string]string // service name → container ID
	TTY       bool
	// Ports are the published ports as the Engine bound them at the last Start.
	Ports []Port

	// Own is the backend's own state of the sandbox (the Docker backend's:
	// the manifest it was made from, its volumes, its claim's connection);
	// nil in a handle made without asking the backend.
	Own any
}

// Handle returns a handle on a sandbox's primary container for terminal I/O (wait,
// attach, resize, signals, copies out), without asking the Engine.
func Handle(id, containerID string, tty bool) *Sandbox {
	return &Sandbox{ID: id, Name: "airlock-" + id, PrimaryID: containerID, TTY: tty, Services: map[string]string{}}
}

// PlanHash identifies what a manifest asks for, without revealing any substituted
// value: substituted env values (delivered at each start) and vault values are
// masked before hashing (manifest.PlanView).
func PlanHash(r *manifest.Resolved, imageID string) string {
	b, _ := json.Marshal(struct {
		M       manifest.Manifest
		Dir     string
		ImageID string
	}{r.PlanView(), r.ProjectDir, imageID})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:16]
}

// Port is one published port: HostIP:HostPort on the host reaches
// ContainerPort/Protocol in the sandbox. The daemon passes it on as a
// client.Port, which shows it.
type Port struct {
	HostIP        string `json:"host_ip"`
	HostPort      int    `json:"host_port"`
	ContainerPort int    `json:"container_port"`
	Protocol      string `json:"protocol"`
}

// Info describes one sandbox for ps and the CLI.
type Info struct {
	ID        string            `json:"id"`
	State     string            `json:"state"` // running, stopped, created, …
	Kind      string            `json:"kind"`
	Project   string            `json:"project"`
	CreatedAt time.Time         `json:"created_at"`
	Labels    map[string]string `json:"labels"`
	Daemons   DaemonCount       `json:"daemons"`
	PlanHash  string            `json:"plan_hash"`
	Image     string            `json:"image"`
	Container string            `json:"container"`
	CLIPid    string            `json:"-"`
	CLIStart  string            `json:"-"`
	Pool      string            `json:"-"` // the key of the warm pool it was made for
}

// DaemonCount is how many daemons are up out of how many the sandbox declares.
type DaemonCount struct {
	Up    int `json:"up"`
	Total int `json:"total"`
}

// Claim is what a run gives a parked sandbox: everything of a cold start's
// Request that the pooled sandbox could not know in advance.
type Claim struct {
	// Manifest is the run's resolved manifest: the same plan as the pooled
	// sandbox's (the pool's key says so), with the run's substituted values,
	// delivered with the claim.
	Manifest *manifest.Resolved
	Command  []string
	// Idle makes the claimed sandbox an idle one (KindUp): no Command; its
	// daemons run until it is stopped, Env and EnvSecrets are its execs'.
	Idle       bool
	Env        []string          // K=V from -e, over [env]
	EnvSecrets map[string]string // -e NAME values from the caller's environment
	Workdir    string            // -w
	Stdin      bool              // the main command reads the attached stdin (else /dev/null)
	Quiet      bool
	EndMarker  string
}

// PrimaryEvent is a primary container's death or OOM kill, as the backend saw it.
type PrimaryEvent struct {
	SandboxID string
	OOM       bool // an OOM kill (a death follows)
	Died      bool
	ExitCode  *int // with Died, when known
	// Reason, with Died, says why the backend took the primary away (its Pod
	// evicted, its node lost); "" when it ended by itself or was stopped.
	Reason string
}

// EgressDenial is one request the proxy refused.
type EgressDenial struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Method string `json:"method"`
}
