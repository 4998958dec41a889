package cli

import (
	"context"
	"io"
	"os"
	"os/signal"

	"github.com/airlock-dev/airlock/client"
)

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
		// The size goes with the request: set before any input arrives,
		// also when the terminal's stream is handed over (its input then
		// goes straight to the Engine).
		r := *req
		r.Height, r.Width = terminalSize(a.stdout)
		req = &r
	}
	s, err := c.ExecAttach(ctx, id, req, in, a.stdout, a.stderr)
	if err != nil {
		return 0, apiFailure(err)
	}
	if req.TTY {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		followResizeFrom(rctx, a.stdout, req.Height == 0, func(h, w uint) { _ = s.Resize(h, w) })
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
