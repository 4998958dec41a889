package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
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
	p, err := a.paths()
	if err != nil {
		return err
	}
	var id, daemon string
	switch len(args) {
	case 2:
		id, daemon = args[0], args[1]
	case 1:
		if in, perr := a.projectSandbox(ctx, c); perr == nil && in != nil && isDaemonDir(p.SandboxDir(in.ID), args[0]) {
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
	if sb, err := c.Get(ctx, id); err != nil {
		return apiFailure(err)
	} else if sb.State == "deleted" {
		return withCode(ExitFailure, fmt.Errorf("sandbox %s was deleted; its logs are gone", id))
	}
	stateDir := p.SandboxDir(id)
	dir := filepath.Join(stateDir, "daemons")
	names := []string{daemon}
	if daemon == "" {
		entries, _ := os.ReadDir(dir)
		names = names[:0]
		for _, e := range entries {
			if e.IsDir() {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
	} else if !isDaemonDir(stateDir, daemon) {
		return withCode(ExitFailure, fmt.Errorf("sandbox %s has no daemon %q", id, daemon))
	}
	file := "stdout.log"
	if o.stderr {
		file = "stderr.log"
	}
	out := &lockedWriter{w: a.stdout}
	var wg sync.WaitGroup
	for _, n := range names {
		prefix := ""
		if daemon == "" && len(names) > 1 {
			prefix = n + " | "
		}
		path := filepath.Join(dir, n, file)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tailFile(ctx, path, prefix, o, out, func() bool {
				in, err := c.Get(ctx, id)
				return err == nil && (in.State == "ready" || in.State == "pending")
			})
		}()
	}
	wg.Wait()
	return nil
}

func isDaemonDir(stateDir, name string) bool {
	st, err := os.Stat(filepath.Join(stateDir, "daemons", name))
	return err == nil && st.IsDir() && filepath.Base(name) == name
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

// tailFile prints the last lines of path and, with follow, what is appended to it
// (starting over when the file is truncated at a sandbox restart) until running()
// says the sandbox stopped or ctx ends.
func tailFile(ctx context.Context, path, prefix string, o logsOptions, w io.Writer, running func() bool) {
	data, _ := os.ReadFile(path)
	offset := int64(len(data))
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	partial := []byte{}
	if len(lines) > 0 && !bytes.HasSuffix(lines[len(lines)-1], []byte("\n")) {
		partial = lines[len(lines)-1]
		lines = lines[:len(lines)-1]
	}
	if o.lines >= 0 && len(lines) > o.lines {
		lines = lines[len(lines)-o.lines:]
	}
	for _, l := range lines {
		fmt.Fprintf(w, "%s%s", prefix, l)
	}
	if !o.follow {
		if len(partial) > 0 {
			fmt.Fprintf(w, "%s%s\n", prefix, partial)
		}
		return
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastCheck := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f, err := os.Open(path)
		if err == nil {
			st, _ := f.Stat()
			if st != nil && st.Size() < offset {
				offset, partial = 0, partial[:0]
			}
			if _, err := f.Seek(offset, io.SeekStart); err == nil {
				r := bufio.NewReader(f)
				for {
					chunk, err := r.ReadBytes('\n')
					offset += int64(len(chunk))
					partial = append(partial, chunk...)
					if err != nil {
						break
					}
					fmt.Fprintf(w, "%s%s", prefix, partial)
					partial = partial[:0]
				}
			}
			f.Close()
		}
		if time.Since(lastCheck) > time.Second {
			lastCheck = time.Now()
			if !running() {
				if len(partial) > 0 {
					fmt.Fprintf(w, "%s%s\n", prefix, partial)
				}
				return
			}
		}
	}
}
