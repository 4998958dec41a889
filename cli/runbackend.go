package cli

import (
	"context"
	"io"
	"path/filepath"
	"time"

	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/sandbox"
)

// runBackend is what the CLI needs of a backend besides the daemon: the sandbox's
// terminal I/O, its end, signals, execs, files and copies back (sandbox.Runtime on
// a Docker Engine, kube.Runtime on a cluster).
type runBackend interface {
	Location() engine.Endpoint
	Open(ctx context.Context, id string, r *manifest.Resolved) (*sandbox.Sandbox, error)
	Get(ctx context.Context, id string) (*sandbox.Info, error)
	PlanHashFor(ctx context.Context, r *manifest.Resolved) (string, error)
	Shell(ctx context.Context, sb *sandbox.Sandbox) []string
	Exec(ctx context.Context, sb *sandbox.Sandbox, req sandbox.ExecRequest, s sandbox.Streams) (*sandbox.Exec, error)
	FollowStderr(ctx context.Context, sb *sandbox.Sandbox, since time.Time, w io.Writer) <-chan error
	Attach(ctx context.Context, sb *sandbox.Sandbox, s sandbox.Streams) (<-chan error, error)
	WaitExit(ctx context.Context, sb *sandbox.Sandbox) (<-chan int, <-chan error)
	Kill(ctx context.Context, sb *sandbox.Sandbox, signal string) error
	Resize(ctx context.Context, sb *sandbox.Sandbox, height, width uint) error
	ProjectCopied(r *manifest.Resolved) bool
	CopyOut(ctx context.Context, containerID string, out *sandbox.Output, rel string) (warnings []string, err error)
}

var _ runBackend = (*sandbox.Runtime)(nil)

// runBackend opens the backend this invocation chose (--backend, AIRLOCK_BACKEND,
// config.toml).
func (a *app) runBackend(ctx context.Context) (runBackend, func(), error) {
	if a.remoteHost() != "" {
		return nil, nil, a.errNeedsLocal()
	}
	b, err := a.backend()
	if err != nil {
		return nil, nil, err
	}
	if !b.Kube() {
		return a.runtime(ctx)
	}
	krt, err := a.openKube(ctx, b)
	if err != nil {
		return nil, nil, err
	}
	return krt, func() {}, nil
}

// firstPath is the first file of a KUBECONFIG list ("" for none): the one the
// daemon is told to read, so that it reaches the cluster the CLI reached.
func firstPath(list string) string {
	for _, p := range filepath.SplitList(list) {
		if p != "" {
			return p
		}
	}
	return ""
}
