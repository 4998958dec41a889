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
	stdout bool
	stderr bool
}

func newLogsCommand(a *app) *cobra.Command {
	var o logsOptions
	cmd := &cobra.Command{
		Use:   "logs [SANDBOX] [DAEMON]",
		Short: "Print daemon logs (stdout and stderr, in order); -f follows across restarts",
		Long: "logs prints the logs the supervisor keeps per daemon: every run's output, appended across restarts\n" +
			"and truncated only when the sandbox starts. It prints both streams in the order the supervisor read\n" +
			"them, as docker logs does: a daemon's stdout lines on stdout, its stderr lines on stderr (2>&1 to\n" +
			"pipe both); --stdout or --stderr prints one. Without DAEMON it prints every daemon's log, each line\n" +
			"prefixed with the daemon's name. With one argument that names a daemon of this project's sandbox,\n" +
			"it is the daemon; otherwise it is a sandbox ID.",
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.stdout && o.stderr {
				return withCode(ExitUsage, fmt.Errorf("give --stdout or --stderr, not both (without either, logs prints both streams)"))
			}
			return a.logs(args, o)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.follow, "follow", "f", false, "keep printing new output until the sandbox stops (or Ctrl-C)")
	f.IntVarP(&o.lines, "tail", "n", -1, "print only the last N lines of each log (of what is printed)")
	f.BoolVar(&o.stdout, "stdout", false, "print only the daemons' stdout")
	f.BoolVar(&o.stderr, "stderr", false, "print only the daemons' stderr (on stderr)")
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
	stream := client.StreamBoth
	switch {
	case o.stdout:
		stream = client.StreamStdout
	case o.stderr:
		stream = client.StreamStderr
	}
	// One lock for both: a line is written whole, and in the order read.
	var mu sync.Mutex
	out, errOut := &lockedWriter{mu: &mu, w: a.stdout}, &lockedWriter{mu: &mu, w: a.stderr}
	var wg sync.WaitGroup
	for _, n := range names {
		prefix := ""
		if daemon == "" && len(names) > 1 {
			prefix = n + " | "
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, err := c.DaemonLog(ctx, id, n, client.LogOptions{Stream: stream, Tail: o.lines, Follow: o.follow})
			if err != nil {
				return // gone meanwhile: nothing to show of it
			}
			defer rc.Close()
			// Lines longer than supervisor.MaxLogLine come cut (or, of both
			// streams, in records of MaxLogLine bytes) already; the bound
			// here (a little above, for the marker) holds whatever comes.
			max := supervisor.MaxLogLine + 256
			ow := &linePrefixer{w: out, prefix: prefix, max: max}
			ew := &linePrefixer{w: errOut, prefix: prefix, max: max}
			switch stream {
			case client.StreamStdout:
				_, _ = io.Copy(ow, rc)
			case client.StreamStderr:
				_, _ = io.Copy(ew, rc)
			default:
				_ = client.SplitLog(rc, ow, ew)
			}
			ow.finish()
			ew.finish()
		}()
	}
	wg.Wait()
	return nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
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
