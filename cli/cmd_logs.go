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
			tailLog(ctx, rt, sb.Container, supervisor.DaemonLogFile(n, o.stderr), prefix, o, out)
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

// tailLog prints the last lines of a daemon's log, read from the sandbox through
// the Engine API and, with follow, what is appended to it until the sandbox stops
// or ctx ends.
func tailLog(ctx context.Context, rt runBackend, containerID, file, prefix string, o logsOptions, w io.Writer) {
	lw := &linePrefixer{w: w, prefix: prefix}
	var last *lastLines
	var dst io.Writer = lw
	if o.lines >= 0 {
		last = &lastLines{n: o.lines}
		dst = last
	}
	offset, _ := rt.CopyFile(ctx, containerID, file, 0, dst)
	if last != nil {
		last.flush(lw)
	}
	if o.follow {
		if rc, err := rt.FollowFile(ctx, containerID, file, offset); err == nil {
			_, _ = io.Copy(lw, rc)
			rc.Close()
		}
	}
	lw.finish()
}

// linePrefixer writes whole lines, each with a prefix; finish ends a last partial line.
type linePrefixer struct {
	w       io.Writer
	prefix  string
	partial []byte
}

func (l *linePrefixer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.partial = append(l.partial, p...)
			break
		}
		l.partial = append(l.partial, p[:i+1]...)
		if _, err := fmt.Fprintf(l.w, "%s%s", l.prefix, l.partial); err != nil {
			return n, err
		}
		l.partial = l.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (l *linePrefixer) finish() {
	if len(l.partial) > 0 {
		fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.partial)
		l.partial = l.partial[:0]
	}
}

// lastLines keeps the last n lines written to it.
type lastLines struct {
	n       int
	lines   [][]byte
	partial []byte
}

func (l *lastLines) Write(p []byte) (int, error) {
	for _, b := range bytes.SplitAfter(p, []byte("\n")) {
		if len(b) == 0 {
			continue
		}
		l.partial = append(l.partial, b...)
		if b[len(b)-1] == '\n' {
			l.lines = append(l.lines, l.partial)
			l.partial = nil
			if len(l.lines) > l.n {
				l.lines = l.lines[len(l.lines)-l.n:]
			}
		}
	}
	return len(p), nil
}

// flush writes the kept lines. A last line without a newline counts as one of
// the n, as it does for tail -n.
func (l *lastLines) flush(w io.Writer) {
	lines := l.lines
	if len(l.partial) > 0 {
		lines = append(lines, l.partial)
	}
	if len(lines) > l.n {
		lines = lines[len(lines)-l.n:]
	}
	for _, line := range lines {
		_, _ = w.Write(line)
	}
}
