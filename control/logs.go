package control

import (
	"bytes"
	"context"
	"io"
	"slices"

	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/supervisor"
)

// LogSource is what reading a daemon's log needs of a backend: an exec of
// `supervise tail` in a running sandbox, the archive API in a stopped one.
type LogSource interface {
	TailLog(ctx context.Context, containerID, file string, lines int, follow bool) (io.ReadCloser, error)
	CopyFile(ctx context.Context, containerID, file string, from int64, w io.Writer) (int64, error)
	FollowFile(ctx context.Context, containerID, file string, from int64) (io.ReadCloser, error)
}

// LogRequest asks for one daemon's log: its stdout or (Stderr) its stderr,
// all of it or (Tail >= 0) its last Tail lines, and with Follow what is
// appended until the sandbox stops or the request ends.
type LogRequest struct {
	Daemon string
	Stderr bool
	Tail   int
	Follow bool
}

// DaemonLog checks a log request against sandbox id and returns the function
// that writes the log; the checks fail before anything is written.
func (s *Service) DaemonLog(id string, q LogRequest) (func(ctx context.Context, w io.Writer), error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return nil, err
	}
	if rec.State == store.StateDeleted || rec.State == store.StateDeleting {
		return nil, errorf(store.ErrInvalidState, "sandbox %s was deleted; its logs are gone", id)
	}
	if q.Daemon == "" {
		return nil, errorf(ErrInvalidRequest, "which daemon's log: give daemon=NAME")
	}
	if !slices.Contains(s.view(rec).DaemonNames, q.Daemon) {
		return nil, errorf(ErrInvalidRequest, "sandbox %s has no daemon %q", id, q.Daemon)
	}
	if rec.ContainerID == "" {
		return func(context.Context, io.Writer) {}, nil // never created: nothing logged
	}
	src, running := s.rtOf(id), rec.State == store.StateReady
	file := supervisor.DaemonLogFile(q.Daemon, q.Stderr)
	return func(ctx context.Context, w io.Writer) {
		WriteDaemonLog(ctx, src, running, rec.ContainerID, file, q.Tail, q.Follow, w)
	}, nil
}

// WriteDaemonLog writes a daemon's log file as it is in the sandbox, or its
// last tail lines (tail >= 0) and, with follow, what is appended to it until
// the sandbox stops or ctx ends. A running sandbox's log is read by an exec of
// `supervise tail`, which finds the last lines by reading backwards from the
// end and cuts lines longer than supervisor.MaxLogLine in the sandbox, so only
// what is shown crosses the API. A stopped container's log can only be read
// whole through the archive API, which cannot seek: with tail a first read
// keeps the offsets where the last lines start, a second writes them, cut as
// in a running sandbox.
func WriteDaemonLog(ctx context.Context, src LogSource, running bool, containerID, file string, tail int, follow bool, w io.Writer) {
	if running {
		if rc, err := src.TailLog(ctx, containerID, file, tail, follow); err == nil {
			_, _ = io.Copy(w, rc)
			rc.Close()
			return
		}
		// It stopped meanwhile: read what is left of it.
	}
	// Cut as `supervise tail` cuts the lines of a running sandbox's log.
	cw, flush := supervisor.CutLines(w, supervisor.MaxLogLine)
	defer flush()
	w = cw
	var from int64
	if tail >= 0 {
		starts := &lineStarts{n: tail}
		size, err := src.CopyFile(ctx, containerID, file, 0, starts)
		if err != nil {
			return
		}
		from = starts.start(size)
	}
	offset, _ := src.CopyFile(ctx, containerID, file, from, w)
	if follow {
		if rc, err := src.FollowFile(ctx, containerID, file, offset); err == nil {
			_, _ = io.Copy(w, rc)
			rc.Close()
		}
	}
}

// lineStarts keeps the offsets where the last n lines written to it start: n
// offsets, never the lines.
type lineStarts struct {
	n       int
	offsets []int64 // a ring of the last n starts; next is where the oldest is
	next    int
	pos     int64 // bytes written so far
	inLine  bool  // a line has begun and not ended
}

func (l *lineStarts) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if !l.inLine {
			l.begin()
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.pos += int64(len(p))
			break
		}
		l.pos += int64(i) + 1
		l.inLine = false
		p = p[i+1:]
	}
	return n, nil
}

// begin records that a line starts at pos.
func (l *lineStarts) begin() {
	l.inLine = true
	if l.n <= 0 {
		return
	}
	if len(l.offsets) < l.n {
		l.offsets = append(l.offsets, l.pos)
		return
	}
	l.offsets[l.next] = l.pos
	l.next = (l.next + 1) % l.n
}

// start is where the last n lines of a file of size bytes start.
func (l *lineStarts) start(size int64) int64 {
	if l.n <= 0 || len(l.offsets) == 0 {
		return size
	}
	if len(l.offsets) < l.n {
		return l.offsets[0]
	}
	return l.offsets[l.next]
}
