// Package backend is the interface between the daemon and a place sandboxes
// run (Backend), and the types, labels and in-sandbox layout both backends
// share: the Docker Engine's (backend/docker) and a Kubernetes cluster's
// (backend/kube).
package backend

import (
	"context"
	"io"
	"time"

	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/manifest"
)

// Backend is what the daemon needs of the place a sandbox runs: a Docker Engine
// (docker.Runtime) or a Kubernetes cluster (kube.Runtime). Its handles, requests
// and descriptions are this package's types; "container" is the primary's ID
// there (a container ID on Docker, a Pod name on Kubernetes).
type Backend interface {
	// Location names the backend; its Key tells backends apart in records.
	Location() engine.Endpoint
	SetHooks(onService func(sandboxID, service string, ready bool, detail string), onStep func(sandboxID, step string, d time.Duration))

	// Prepare does a future Create's checks and image work (pull, build) with
	// its output and credentials in o, which are the call's own.
	Prepare(ctx context.Context, r *manifest.Resolved, o PrepareOptions) error
	Create(ctx context.Context, req *Request) (*Sandbox, error)
	Open(ctx context.Context, id string, r *manifest.Resolved) (*Sandbox, error)
	Start(ctx context.Context, sb *Sandbox) error
	// WatchParked follows a started pooled sandbox (Request.Park): parked
	// is called once it parked; it returns when the sandbox cannot serve a
	// claim any more (why), or ctx ends. Claim hands it to a run
	// (ErrUnhealthy: it cannot serve one).
	WatchParked(ctx context.Context, sb *Sandbox, parked func()) error
	Claim(ctx context.Context, sb *Sandbox, c Claim) error
	Stop(ctx context.Context, id string) error
	Remove(ctx context.Context, id string) error
	RemoveContainers(ctx context.Context, id string) error
	RemoveNetworks(ctx context.Context, id string) error

	Get(ctx context.Context, id string) (*Info, error)
	// PlanHashFor is the plan hash a sandbox made from r now would carry.
	PlanHashFor(ctx context.Context, r *manifest.Resolved) (string, error)
	// Shell is the command of an interactive shell in the sandbox.
	Shell(ctx context.Context, sb *Sandbox) []string
	List(ctx context.Context, labels map[string]string, all bool) ([]Info, error)
	Running(ctx context.Context, containerID string) bool
	ExitCode(ctx context.Context, containerID string) *int
	PrimaryEnd(ctx context.Context, containerID string, lines int) (code *int, output string, ok bool)
	KillPrimary(ctx context.Context, containerID, signal string) error
	WatchPrimaries(ctx context.Context, on func(PrimaryEvent)) error

	FollowStatus(ctx context.Context, containerID string, from int64) (io.ReadCloser, error)
	ReadFile(ctx context.Context, containerID, file string, from, limit int64) ([]byte, int64, error)
	FollowEgress(ctx context.Context, sandboxID string, denied func(EgressDenial)) error
	Exec(ctx context.Context, sb *Sandbox, req ExecRequest, s Streams) (*Exec, error)
	// SignalExec sends signal to the process group of API exec execID
	// (ExecRequest.ID) in the primary: gone is true when none of its
	// processes is left.
	SignalExec(ctx context.Context, containerID, execID, signal string) (gone bool, err error)

	// The main command's streams: Attach connects them live (before the
	// start, so nothing is missed), FollowOutput copies its output from the
	// start until it ends (a client attaching again), WaitExit gives its code.
	Attach(ctx context.Context, sb *Sandbox, s Streams) (<-chan error, error)
	FollowOutput(ctx context.Context, sb *Sandbox, stdout, stderr io.Writer) <-chan error
	WaitExit(ctx context.Context, sb *Sandbox) (<-chan int, <-chan error)
	Resize(ctx context.Context, sb *Sandbox, height, width uint) error

	// ReadArchive streams a tar archive of path (absolute) in the primary,
	// entries named from its base name, a link at path not followed; a
	// missing path wraps ErrNoSuchPath. WriteArchive extracts a tar
	// stream into dir (made when missing), every entry the sandbox user's.
	ReadArchive(ctx context.Context, containerID, path string) (io.ReadCloser, error)
	WriteArchive(ctx context.Context, containerID, dir string, tar io.Reader) error

	// The daemons' logs (LogSource).
	LogSource

	DiskUsage(ctx context.Context) *DiskUsage
	PruneCandidates(ctx context.Context, o PruneOptions, du *DiskUsage) ([]PruneObject, error)
	PruneRemove(ctx context.Context, o PruneObject) (freed bool, err error)
}

// LogSource is what reading a daemon's log needs of a backend: an exec of
// `supervise tail` in a running sandbox, the archive API in a stopped one.
type LogSource interface {
	TailLog(ctx context.Context, containerID, file string, lines int, follow bool) (io.ReadCloser, error)
	CopyFile(ctx context.Context, containerID, file string, from int64, w io.Writer) (int64, error)
	FollowFile(ctx context.Context, containerID, file string, from int64) (io.ReadCloser, error)
}

// DataDirer is a backend that keeps files of its own on the daemon's host:
// DataDir is the data directory they are under (ok false: none). The daemon
// puts its default places for exec output and the empty project there.
type DataDirer interface {
	DataDir() (dir string, ok bool)
}

// OOMReporter is offered by a backend that can tell, once a primary has
// stopped, whether it was killed for its memory limit: the daemon asks when a
// primary's end (137) is reported before the kill's own event. limited says
// whether the container had a memory limit at all (without one, it was not
// killed for it: the daemon need not wait for a kill's event that comes
// late).
type OOMReporter interface {
	OOMKilled(ctx context.Context, containerID string) (killed, limited bool)
}

// EgressSyncer is offered by a backend whose egress denials come through a
// stream shared by several sandboxes: SyncEgress returns once every denial the
// proxy made for sandbox id so far was passed to its FollowEgress, so that
// the daemon can record them as the sandbox stops, before its removal.
type EgressSyncer interface {
	SyncEgress(ctx context.Context, id string) error
}
