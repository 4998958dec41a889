package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/internal/fsentry"
	"github.com/airlock-dev/airlock/supervisor"
)

// The files API's operations on a ready sandbox beside read and write (list,
// stat, remove, mkdir, rename, watch): each a short exec of `airlock
// supervise fs` in the primary, as the sandbox's user (backend.FsCall), so
// that they work the same on every backend. Paths follow the read and write
// routes' rules (filesPath).

// fileOps is the files operations of the API's domain.
type fileOps interface {
	ListFiles(ctx context.Context, id, p string, depth, limit int) (*client.FileList, error)
	StatFile(ctx context.Context, id, p string) (*client.FileEntry, error)
	RemoveFile(ctx context.Context, id, p string, recursive bool) error
	RemoveFiles(ctx context.Context, id string, req client.RemoveFilesRequest) error
	MakeDir(ctx context.Context, id, p string, parents bool) error
	RenameFile(ctx context.Context, id, from, to string, overwrite bool) error
	WatchFiles(ctx context.Context, id, p string, o WatchOptions) (*FileWatch, error)
}

// Bounds of a listing.
const (
	DefaultListLimit = 10000
	MaxListLimit     = 100000
	MaxListDepth     = 64
)

// ListFiles lists the directory p of sandbox id to depth levels, at most
// limit entries (0: the defaults).
func (s *Service) ListFiles(ctx context.Context, id, p string, depth, limit int) (*client.FileList, error) {
	p, err := filesPath(p)
	if err != nil {
		return nil, err
	}
	if depth == 0 {
		depth = 1
	}
	if limit == 0 {
		limit = DefaultListLimit
	}
	if depth < 1 || depth > MaxListDepth {
		return nil, errorf(ErrInvalidRequest, "depth %d is out of range: 1 (the directory's entries) to %d", depth, MaxListDepth)
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, errorf(ErrInvalidRequest, "limit %d is out of range: 1 to %d entries", limit, MaxListLimit)
	}
	var l client.FileList
	err = s.fsCall(ctx, id, "list", []string{"--depth", strconv.Itoa(depth), "--limit", strconv.Itoa(limit)}, &l, p)
	if err != nil {
		return nil, err
	}
	l.Path = p
	return &l, nil
}

// StatFile describes the path p of sandbox id (a link is not followed).
func (s *Service) StatFile(ctx context.Context, id, p string) (*client.FileEntry, error) {
	p, err := filesPath(p)
	if err != nil {
		return nil, err
	}
	var e client.FileEntry
	if err := s.fsCall(ctx, id, "stat", nil, &e, p); err != nil {
		return nil, err
	}
	return &e, nil
}

// RemoveFile removes the path p of sandbox id: a file, a link or an empty
// directory; with recursive, a directory and what it holds.
func (s *Service) RemoveFile(ctx context.Context, id, p string, recursive bool) error {
	p, err := filesPath(p)
	if err != nil {
		return err
	}
	if p == "/" {
		return errorf(ErrInvalidRequest, "path / cannot be removed")
	}
	var args []string
	if recursive {
		args = []string{"--recursive"}
	}
	return s.fsCall(ctx, id, "rm", args, nil, p)
}

// RemoveFiles removes many paths of sandbox id in one exec (POST
// …/files/remove): each as RemoveFile does, in order, stopping at the first
// failure; with MissingOK a path not there is skipped. At most
// supervisor.MaxRemovePaths paths.
func (s *Service) RemoveFiles(ctx context.Context, id string, req client.RemoveFilesRequest) error {
	if len(req.Paths) == 0 {
		return errorf(ErrInvalidRequest, "paths is empty: name at least one absolute path in the sandbox")
	}
	if len(req.Paths) > supervisor.MaxRemovePaths {
		return errorf(ErrInvalidRequest, "paths names %d paths, over the limit of %d a request", len(req.Paths), supervisor.MaxRemovePaths)
	}
	var in bytes.Buffer
	for i, p := range req.Paths {
		c, err := filesPathOf(fmt.Sprintf("paths[%d]", i), p)
		if err != nil {
			return errorf(ErrInvalidRequest, "paths[%d]: %v", i, err)
		}
		if c == "/" {
			return errorf(ErrInvalidRequest, "paths[%d]: / cannot be removed", i)
		}
		in.WriteString(c)
		in.WriteByte(0)
	}
	if in.Len() > supervisor.MaxRemoveInput {
		return errorf(ErrInvalidRequest, "paths hold %d bytes, over the limit of %d a request", in.Len(), supervisor.MaxRemoveInput)
	}
	args := []string{"--stdin"}
	if req.Recursive {
		args = append(args, "--recursive")
	}
	if req.MissingOK {
		args = append(args, "--missing-ok")
	}
	rt, cid, err := s.files.target(id, store.StateReady)
	if err != nil {
		return err
	}
	ex, err := execer(rt)
	if err != nil {
		return err
	}
	return fsAPIError(backend.FsCallInput(ctx, ex, cid, "rm", args, &in, nil))
}

// MakeDir makes the directory p of sandbox id; with parents, the missing
// ones on the way, and an existing directory is no error.
func (s *Service) MakeDir(ctx context.Context, id, p string, parents bool) error {
	p, err := filesPath(p)
	if err != nil {
		return err
	}
	var args []string
	if parents {
		args = []string{"--parents"}
	}
	return s.fsCall(ctx, id, "mkdir", args, nil, p)
}

// RenameFile renames from as to in sandbox id; without overwrite, an
// existing to is already_exists.
func (s *Service) RenameFile(ctx context.Context, id, from, to string, overwrite bool) error {
	from, err := filesPathOf("from", from)
	if err != nil {
		return err
	}
	to, err = filesPathOf("to", to)
	if err != nil {
		return err
	}
	if from == "/" || to == "/" {
		return errorf(ErrInvalidRequest, "/ cannot be renamed, nor replaced")
	}
	var args []string
	if overwrite {
		args = []string{"--overwrite"}
	}
	return s.fsCall(ctx, id, "mv", args, nil, from, to)
}

// WatchOptions bound a watch (WatchFiles): 0 for the defaults.
type WatchOptions struct {
	Recursive bool
	MaxDirs   int
	Rate      int
}

// FileWatch is a running watch: its ready event, then Events until the watch
// ends; Close ends it, and its process in the sandbox.
type FileWatch struct {
	*backend.FsWatcher
	release func()
}

// Close ends the watch.
func (w *FileWatch) Close() {
	w.FsWatcher.Close()
	w.release()
}

// WatchFiles watches the directory p of sandbox id. The sandbox counts as
// attached while it is watched: the idle reaper leaves it alone. It has at
// most MaxFileWatches watches open (too_many_watches, 429, beyond).
func (s *Service) WatchFiles(ctx context.Context, id, p string, o WatchOptions) (*FileWatch, error) {
	p, err := filesPath(p)
	if err != nil {
		return nil, err
	}
	if o.MaxDirs == 0 {
		o.MaxDirs = supervisor.DefaultWatchMaxDirs
	}
	if o.Rate == 0 {
		o.Rate = supervisor.DefaultWatchRate
	}
	if o.MaxDirs < 1 || o.MaxDirs > supervisor.MaxWatchMaxDirs {
		return nil, errorf(ErrInvalidRequest, "max_dirs %d is out of range: 1 to %d directories", o.MaxDirs, supervisor.MaxWatchMaxDirs)
	}
	if o.Rate < 1 || o.Rate > supervisor.MaxWatchRate {
		return nil, errorf(ErrInvalidRequest, "rate %d is out of range: 1 to %d events a second", o.Rate, supervisor.MaxWatchRate)
	}
	rt, cid, err := s.files.target(id, store.StateReady)
	if err != nil {
		return nil, err
	}
	ex, err := execer(rt)
	if err != nil {
		return nil, err
	}
	slot, err := s.watches.take(id)
	if err != nil {
		return nil, err
	}
	attached, err := s.Attach(id)
	if err != nil {
		slot()
		return nil, err
	}
	release := func() { attached(); slot() }
	args := []string{"--max-dirs", strconv.Itoa(o.MaxDirs), "--rate", strconv.Itoa(o.Rate)}
	if o.Recursive {
		args = append(args, "--recursive")
	}
	w, err := backend.FsWatch(ctx, ex, cid, args, p)
	if err != nil {
		release()
		return nil, fsAPIError(err)
	}
	return &FileWatch{FsWatcher: w, release: release}, nil
}

// filesPathOf is filesPath for the parameter name.
func filesPathOf(name, p string) (string, error) {
	if p == "" {
		return "", errorf(ErrInvalidRequest, "%s is required: an absolute path in the sandbox (?%s=/work/a)", name, name)
	}
	return filesPath(p)
}

// fsCall runs `supervise fs op` in sandbox id, which must be ready.
func (s *Service) fsCall(ctx context.Context, id, op string, args []string, out any, paths ...string) error {
	rt, cid, err := s.files.target(id, store.StateReady)
	if err != nil {
		return err
	}
	ex, err := execer(rt)
	if err != nil {
		return err
	}
	return fsAPIError(backend.FsCall(ctx, ex, cid, op, args, out, paths...))
}

// execer is the channel of rt to a running sandbox.
func execer(rt backend.Backend) (backend.Execer, error) {
	ex, ok := rt.(backend.Execer)
	if !ok {
		return nil, errors.New("cannot reach into the sandbox: its backend runs no execs for the daemon")
	}
	return ex, nil
}

// fsAPIError maps a failure of `supervise fs` onto the API's errors: the
// reasons the read and write routes have (path_not_found, not_a_directory,
// is_a_directory), and already_exists, not_empty, permission_denied and
// invalid_request.
func fsAPIError(err error) error {
	var fe *backend.FsError
	if !errors.As(err, &fe) {
		return err
	}
	switch fe.Kind {
	case fsentry.KindExists:
		return &client.Error{Status: http.StatusConflict, Reason: client.ReasonAlreadyExists, Message: fe.Msg}
	case fsentry.KindNotEmpty:
		return &client.Error{Status: http.StatusConflict, Reason: client.ReasonNotEmpty, Message: fe.Msg}
	case fsentry.KindPermission:
		return &client.Error{Status: http.StatusForbidden, Reason: client.ReasonPermissionDenied, Message: fe.Msg}
	case fsentry.KindInvalid:
		return errorf(ErrInvalidRequest, "%s", fe.Msg)
	}
	return err
}
