package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/supervisor"
)

func init() { addCommand(newLogsCommand) }

type logsOptions struct {
	follow bool
	lines  int
	stderr bool
}

func newLogsCommand(a *app) *cobra.Command {
	var o logsOptions
	cmd := &cobra.Command{
		Use:   "logs [SANDBOX] [DAEMON]",
		Short: "Print daemon logs (stdout, or --stderr); -f follows across restarts",
		Long: "logs prints the logs the supervisor keeps per daemon: every run's output, appended across restarts\n" +
			"and truncated only when the sandbox starts. Without DAEMON it prints every daemon's log, each line\n" +
			"prefixed with the daemon's name. With one argument that names a daemon of this project's sandbox,\n" +
			"it is the daemon; otherwise it is a sandbox ID.",
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.logs(args, o)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.follow, "follow", "f", false, "keep printing new output until the sandbox stops (or Ctrl-C)")
	f.IntVarP(&o.lines, "tail", "n", -1, "print only the last N lines of each log")
	f.BoolVar(&o.stderr, "stderr", false, "print the daemons' stderr instead of stdout")
	return cmd
}

func (a *app) logs(args []string, o logsOptions) error {
	if a.remoteHost() != "" {
		return a.errNeedsLocal() // the logs are read through the Engine, not the API, yet
	}
	ctx, cancel := signal.NotifyContext(context.Background(), unix.SIGINT, unix.SIGTERM)
	defer cancel()
	c, err := a.daemonClient(ctx)
	if err != nil {
		return err
	}
	var id, daemon string
	switch len(args) {
	case 2:
		id, daemon = args[0], args[1]
	case 1:
		if in, perr := a.projectSandbox(ctx, c); perr == nil && in != nil && slices.Contains(in.DaemonNames, args[0]) {
			id, daemon = in.ID, args[0]
		} else {
			id = args[0]
		}
	default:
		list, err := a.targets(ctx, c, nil, nil)
		if err != nil {
			return err
		}
		id = list[0].ID
	}
	sb, err := c.Get(ctx, id)
	if err != nil {
		return apiFailure(err)
	}
	if sb.State == "deleted" || sb.State == "deleting" {
		return withCode(ExitFailure, fmt.Errorf("sandbox %s was deleted; its logs are gone", id))
	}
	names := sb.DaemonNames
	if daemon != "" {
		if !slices.Contains(sb.DaemonNames, daemon) {
			return withCode(ExitFailure, fmt.Errorf("sandbox %s has no daemon %q", id, daemon))
		}
		names = []string{daemon}
	}
	if sb.Container == "" || len(names) == 0 {
		return nil
	}
	rt, closeRT, err := a.runtimeFor(ctx, sb)
	if err != nil {
		return err
	}
	defer closeRT()
	out := &lockedWriter{w: a.stdout}
	var wg sync.WaitGroup
	for _, n := range names {
		prefix := ""
		if daemon == "" && len(names) > 1 {
			prefix = n + " | "
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tailLog(ctx, rt, sb.State == client.StateReady, sb.Container, supervisor.DaemonLogFile(n, o.stderr), prefix, o, out)
		}()
	}
	wg.Wait()
	return nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// tailLog prints a daemon's log, read from the sandbox through the Engine API, or
// its last lines and, with follow, what is appended to it until the sandbox stops
// or ctx ends. No line is held beyond supervisor.MaxLogLine bytes: a longer one is
// cut, its first MaxLogLine bytes printed, then a marker saying how many were
// not. A running sandbox's log is read by an exec of `supervise tail`, which
// finds the last lines by reading backwards from the end and cuts long lines in
// the sandbox, so only what is printed crosses the API. A stopped container's log
// can only be read whole through the archive API, which cannot seek: with -n a
// first read keeps the offsets where the last lines start, a second prints them.
func tailLog(ctx context.Context, rt runBackend, running bool, containerID, file, prefix string, o logsOptions, w io.Writer) {
	if running {
		// Lines come cut already; the bound here (a little above, for the
		// marker) holds whatever the stream from the sandbox holds.
		lw := &linePrefixer{w: w, prefix: prefix, max: supervisor.MaxLogLine + 256}
		if rc, err := rt.TailLog(ctx, containerID, file, o.lines, o.follow); err == nil {
			_, _ = io.Copy(lw, rc)
			rc.Close()
			lw.finish()
			return
		}
		// It stopped meanwhile: read what is left of it.
	}
	lw := &linePrefixer{w: w, prefix: prefix, max: supervisor.MaxLogLine}
	defer lw.finish()
	var from int64
	if o.lines >= 0 {
		starts := &lineStarts{n: o.lines}
		size, err := rt.CopyFile(ctx, containerID, file, 0, starts)
		if err != nil {
			return
		}
		from = starts.start(size)
	}
	offset, _ := rt.CopyFile(ctx, containerID, file, from, lw)
	if o.follow {
		if rc, err := rt.FollowFile(ctx, containerID, file, offset); err == nil {
			_, _ = io.Copy(lw, rc)
			rc.Close()
		}
	}
}

// linePrefixer writes whole lines, each with a prefix. It holds at most max bytes
// of a line: a longer one is cut, its first max bytes written with
// supervisor.LineCut's marker once its end comes. finish ends a last partial line.
type linePrefixer struct {
	w       io.Writer
	prefix  string
	max     int
	partial []byte
	cut     bool  // the line passed max
	skipped int64 // bytes of the line not held
}

func (l *linePrefixer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if take := min(l.max-len(l.partial), len(seg)); take > 0 {
			l.partial = append(l.partial, seg[:take]...)
			seg = seg[take:]
		}
		if len(seg) > 0 {
			l.cut = true
			l.skipped += int64(len(seg))
		}
		if i < 0 {
			break
		}
		if err := l.emit(); err != nil {
			return n, err
		}
		p = p[i+1:]
	}
	return n, nil
}

// emit writes the held line with its prefix, its marker when it was cut, and a newline.
func (l *linePrefixer) emit() error {
	cut := ""
	if l.cut {
		cut = supervisor.LineCut(l.skipped)
	}
	_, err := fmt.Fprintf(l.w, "%s%s%s\n", l.prefix, l.partial, cut)
	l.partial, l.cut, l.skipped = l.partial[:0], false, 0
	return err
}

func (l *linePrefixer) finish() {
	if len(l.partial) > 0 || l.cut {
		_ = l.emit()
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
