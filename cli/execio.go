package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
)

// execRecorded is execInteractive recorded by the daemon: exec.started before, and
// exec.finished with the exit code after; a client is attached meanwhile.
func (a *app) execRecorded(ctx context.Context, c *client.Client, rt runBackend, sb *sandbox.Sandbox, req sandbox.ExecRequest) (int, error) {
	// The daemon only records this exec: its env values need not travel there.
	ex, err := c.Exec(ctx, sb.ID, &client.ExecRequest{Cmd: req.Cmd, Workdir: req.Workdir, Interactive: true})
	if err != nil {
		return 0, apiFailure(err)
	}
	release, err := c.Attach(ctx, sb.ID)
	if err == nil {
		defer release()
	}
	code, err := a.execInteractive(ctx, rt, sb, req)
	if err != nil {
		code = ExitAirlock
	}
	if _, ferr := c.FinishExec(context.WithoutCancel(ctx), sb.ID, ex.ID, code); ferr != nil && err == nil {
		fmt.Fprintf(a.stderr, "airlock: cannot record the end of exec %s: %v\n", ex.ID, ferr)
	}
	return code, err
}

// execInteractive runs cmd in a running sandbox with the CLI's terminal or pipes and
// returns its exit code. With a TTY the terminal is in raw mode for the duration
// and restored on every path; resizes are forwarded.
func (a *app) execInteractive(ctx context.Context, rt runBackend, sb *sandbox.Sandbox, req sandbox.ExecRequest) (int, error) {
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
	return backoff.RetryWithData(func() (int, error) { return ex.ExitCode(ctx) },
		backoff.WithContext(every(10*time.Millisecond, 5*time.Second), ctx))
}

// execAttached runs req in sandbox id through the daemon (an attached exec:
// client.ExecAttach) with the CLI's terminal or pipes, and returns its exit
// code; the daemon records it. With a TTY the terminal is in raw mode for the
// duration and restored on every path; its size is sent first, then on every
// change. Without one, Ctrl-C and friends end the CLI's wait, not the command
// (as before: 130, like a shell).
func (a *app) execAttached(ctx context.Context, c *client.Client, id string, req *client.ExecRequest, stdin bool) (int, error) {
	var in io.Reader
	if stdin {
		in = a.stdin
	}
	var restore func()
	if req.TTY {
		restore = rawTerminal(a.stdin)
		defer restore()
	}
	s, err := c.ExecAttach(ctx, id, req, in, a.stdout, a.stderr)
	if err != nil {
		return 0, apiFailure(err)
	}
	if req.TTY {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		followResize(rctx, a.stdout, func(h, w uint) { _ = s.Resize(h, w) })
	} else {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, forwardedSignals...)
		defer signal.Stop(sigs)
		select {
		case <-s.Done():
		case <-sigs:
			_ = s.Close()
			return ExitInterrupted, nil
		}
	}
	_, code, err := s.Wait()
	if err != nil {
		return ExitAirlock, withCode(ExitAirlock, err)
	}
	return code, nil
}
