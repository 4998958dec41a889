package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/client"
)

// projectDir returns the project dir: --project, else the directory of the
// project's sandbox.toml.
func (a *app) projectDir() (string, error) {
	if dir, err := a.projectFlag(); err != nil || dir != "" {
		return dir, err
	}
	f, err := a.manifestFile()
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(f)
	if err != nil {
		return "", err
	}
	return filepath.Dir(abs), nil
}

// projectSandbox returns the project's `up` sandbox, or nil when it has none.
func (a *app) projectSandbox(ctx context.Context, c *client.Client) (*client.Sandbox, error) {
	dir, err := a.projectDir()
	if err != nil {
		return nil, err
	}
	list, err := c.List(ctx, nil)
	if err != nil {
		return nil, apiFailure(err)
	}
	var found *client.Sandbox
	for i := range list {
		s := list[i]
		if s.Project == dir && s.Kind == client.KindUp && s.State != client.StateDeleting {
			found = &s
		}
	}
	return found, nil
}

// targets resolves the sandboxes a lifecycle command acts on: the named one, every
// one matching all labels, or the project's.
func (a *app) targets(ctx context.Context, c *client.Client, args []string, labelFlags []string) ([]client.Sandbox, error) {
	if len(labelFlags) > 0 {
		if len(args) > 0 {
			return nil, withCode(ExitUsage, fmt.Errorf("give a sandbox or --label, not both"))
		}
		labels, err := parseLabels(labelFlags)
		if err != nil {
			return nil, err
		}
		list, err := c.List(ctx, labels)
		if err != nil {
			return nil, apiFailure(err)
		}
		return list, nil
	}
	if len(args) > 0 {
		sb, err := c.Get(ctx, args[0])
		if err != nil {
			return nil, apiFailure(err)
		}
		if sb.State == client.StateDeleted {
			return nil, withCode(ExitFailure, fmt.Errorf("sandbox %s was deleted", sb.ID))
		}
		return []client.Sandbox{*sb}, nil
	}
	sb, err := a.projectSandbox(ctx, c)
	if err != nil {
		return nil, err
	}
	if sb == nil {
		dir, _ := a.projectDir()
		return nil, withCode(ExitFailure, fmt.Errorf("no sandbox for the project %s (start one with `airlock up`)", dir))
	}
	return []client.Sandbox{*sb}, nil
}

// projectLock is the per-project lock `up` holds from looking the project's
// sandbox up until it is ready or failed, so that two `up` of one project make
// one sandbox: the second waits, then finds the first's.
type projectLock struct{ f *os.File }

// lockPollInterval is how often a waiting `up` tries the project's lock again.
const lockPollInterval = 100 * time.Millisecond

// lockProject takes the lock of the project dir: an exclusive flock on
// up-<hash of dir>.lock (mode 0600) in the user's runtime dir, which is made or
// checked first (a real directory of the user's with mode 0700). While another
// process holds it, it says so once (unless quiet) and waits until the lock is
// free or ctx ends. The kernel releases it if the process dies.
func (a *app) lockProject(ctx context.Context, dir string) (*projectLock, error) {
	p, err := a.daemonPaths()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(dir))
	path := filepath.Join(p.RuntimeDir, "up-"+hex.EncodeToString(sum[:12])+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, withCode(ExitAirlock, fmt.Errorf("cannot open the project lock %s: %w", path, err))
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, withCode(ExitAirlock, fmt.Errorf("cannot use the project lock %s: not a regular file", path))
	}
	if st.Mode().Perm() != 0o600 {
		// Made by something else in our private dir: make it private too.
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return nil, withCode(ExitAirlock, fmt.Errorf("cannot set the mode of the project lock %s: %w", path, err))
		}
	}
	said := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &projectLock{f: f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, withCode(ExitAirlock, fmt.Errorf("cannot lock %s: %w", path, err))
		}
		if !said && !a.opts.quiet {
			fmt.Fprintf(a.stderr, "airlock: waiting for another `airlock up` of %s\n", dir)
			said = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(lockPollInterval):
		}
	}
}

// release frees the lock; it may be called more than once.
func (l *projectLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	l.f.Close()
	l.f = nil
}
