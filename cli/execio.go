package cli

import (
	"context"
	"os"
	"os/signal"
	"time"

	"github.com/airlock-dev/airlock/sandbox"
)

// execInteractive runs cmd in a running sandbox with the CLI's terminal or pipes and
// returns its exit code. With a TTY the terminal is in raw mode for the duration
// and restored on every path; resizes are forwarded.
func (a *app) execInteractive(ctx context.Context, rt *sandbox.Runtime, sb *sandbox.Sandbox, req sandbox.ExecRequest) (int, error) {
	streams := sandbox.Streams{Stdin: a.stdin, Stdout: a.stdout, Stderr: a.stderr}
	ex, err := rt.Exec(ctx, sb, req, streams)
	if err != nil {
		return 0, err
	}
	restore := func() {}
	if req.TTY {
		restore = rawTerminal(a.stdin)
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		followResize(rctx, a.stdout, func(h, w uint) { _ = ex.Resize(rctx, h, w) })
	} else {
		// Without a terminal, Ctrl-C and friends end the CLI's wait, not the command:
		// the exec keeps its own process; report 130 like a shell would.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, forwardedSignals...)
		defer signal.Stop(sigs)
		select {
		case <-ex.Done:
		case <-sigs:
			return ExitInterrupted, nil
		}
	}
	defer restore()
	if req.TTY {
		<-ex.Done
	}
	restore()
	// The exec's exit code is set a moment after its output ends.
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, err := ex.ExitCode(ctx)
		if err == nil || time.Now().After(deadline) {
			return code, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
