package control

import (
	"bytes"
	"context"
	"io"
	"slices"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/supervisor"
)

// LogRequest asks for one daemon's log: its stdout, its stderr or both (Stream,
// client.StreamBoth when empty), all of it or (Tail >= 0) its last Tail lines,
// and with Follow what is appended until the sandbox stops or the request ends.
type LogRequest struct {
	Daemon string
	Stream string
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
	if q.Stream == "" {
		q.Stream = client.StreamBoth
	}
	if !slices.Contains([]string{client.StreamStdout, client.StreamStderr, client.StreamBoth}, q.Stream) {
		return nil, errorf(ErrInvalidRequest, "stream %q is not stdout, stderr or both", q.Stream)
	}
	if !slices.Contains(s.view(rec).DaemonNames, q.Daemon) {
		return nil, errorf(ErrInvalidRequest, "sandbox %s has no daemon %q", id, q.Daemon)
	}
	if rec.ContainerID == "" {
		return func(context.Context, io.Writer) {}, nil // never created: nothing logged
	}
	src, running := s.rtOf(id), rec.State == store.StateReady
	return func(ctx context.Context, w io.Writer) {
		WriteDaemonLog(ctx, src, running, rec.ContainerID, q.Daemon, q.Stream, q.Tail, q.Follow, w)
	}, nil
}

// WriteDaemonLog writes a daemon's log of stream (client.StreamStdout,
// StreamStderr or StreamBoth) as it is in the sandbox, or its last tail lines
// (tail >= 0) and, with follow, what is appended to it until the sandbox stops
// or ctx ends. Both streams are the daemon's combined log
// (supervisor.OutputLog): records, each RecordStdout or RecordStderr and a
// line; a sandbox whose supervisor kept no combined log (an older one) gets its
// stdout log as records.
func WriteDaemonLog(ctx context.Context, src backend.LogSource, running bool, containerID, daemon, stream string, tail int, follow bool, w io.Writer) {
	if stream != client.StreamBoth {
		writeLogFile(ctx, src, running, containerID, supervisor.DaemonLogFile(daemon, stream == client.StreamStderr), tail, follow, w, false)
		return
	}
	if writeLogFile(ctx, src, running, containerID, supervisor.DaemonOutputLog(daemon), tail, follow, w, true) {
		return
	}
	rw := &recordWriter{w: w, tag: []byte(supervisor.RecordStdout)}
	writeLogFile(ctx, src, running, containerID, supervisor.DaemonLogFile(daemon, false), tail, follow, rw, false)
}

// writeLogFile writes a log file as WriteDaemonLog does. A running sandbox's
// log is read by an exec of `supervise tail`, which finds the last lines by
// reading backwards from the end and cuts lines longer than
// supervisor.MaxLogLineOf(file) in the sandbox, so only what is shown crosses
// the API. A stopped container's log can only be read whole through the archive
// API, which cannot seek: with tail a first read keeps the offsets where the
// last lines start, a second writes them, cut as in a running sandbox. With
// mustExist, a file that is not there is reported (false), nothing written.
func writeLogFile(ctx context.Context, src backend.LogSource, running bool, containerID, file string, tail int, follow bool, w io.Writer, mustExist bool) bool {
	if running {
		if mustExist && follow {
			// A followed file that is not there is waited for: find out first.
			rc, err := src.TailLog(ctx, containerID, file, 0, false)
			if err == nil {
				_, err = io.Copy(io.Discard, rc)
				rc.Close()
				if err != nil {
					return false
				}
			}
		}
		if rc, err := src.TailLog(ctx, containerID, file, tail, follow); err == nil {
			counted := &countWriter{w: w}
			_, err = io.Copy(counted, rc)
			rc.Close()
			// A tail of a file that is not there fails before any byte.
			return !(mustExist && err != nil && counted.n == 0)
		}
		// It stopped meanwhile: read what is left of it.
	}
	// Cut as `supervise tail` cuts the lines of a running sandbox's log.
	cw, flush := supervisor.CutLines(w, supervisor.MaxLogLineOf(file))
	defer flush()
	var from int64
	if tail >= 0 {
		starts := &lineStarts{n: tail}
		size, err := src.CopyFile(ctx, containerID, file, 0, starts)
		if err != nil {
			return !mustExist
		}
		from = starts.start(size)
	}
	counted := &countWriter{w: cw}
	offset, err := src.CopyFile(ctx, containerID, file, from, counted)
	if err != nil && mustExist && tail < 0 && counted.n == 0 {
		return false
	}
	if follow {
		if rc, err := src.FollowFile(ctx, containerID, file, offset); err == nil {
			_, _ = io.Copy(cw, rc)
			rc.Close()
		}
	}
	return true
}

// countWriter counts what it passes on.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// recordWriter writes each line with a tag before it: a stream's log as the
// records of the combined one.
type recordWriter struct {
	w      io.Writer
	tag    []byte
	inLine bool // a line was begun and not ended
	buf    []byte
}

func (r *recordWriter) Write(p []byte) (int, error) {
	n := len(p)
	b := r.buf[:0]
	for len(p) > 0 {
		if !r.inLine {
			b = append(b, r.tag...)
			r.inLine = true
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			b = append(b, p...)
			break
		}
		b = append(b, p[:i+1]...)
		r.inLine = false
		p = p[i+1:]
	}
	r.buf = b[:0]
	if _, err := r.w.Write(b); err != nil {
		return 0, err
	}
	return n, nil
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
