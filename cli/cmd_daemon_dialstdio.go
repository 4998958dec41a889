package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/spf13/cobra"
)

// newDaemonDialStdioCommand is `airlock daemon dial-stdio`: the API of this
// user's daemon (started when it is not running) on stdin and stdout, for a
// client on another machine that runs it over ssh (as `docker system
// dial-stdio` serves the docker CLI's ssh:// hosts).
func newDaemonDialStdioCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "dial-stdio",
		Short: "Speak the daemon's API on stdin and stdout (for a remote client over ssh)",
		Long: "dial-stdio connects stdin and stdout to this user's control daemon, starting it when it does not run:\n" +
			"a client on another machine reaches the API with `ssh user@host airlock daemon dial-stdio`.\n" +
			"See docs/api.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if _, err := a.localDaemonClient(ctx); err != nil {
				return err
			}
			p, err := a.daemonPaths()
			if err != nil {
				return err
			}
			var d net.Dialer
			conn, err := d.DialContext(ctx, "unix", p.Socket())
			if err != nil {
				return withCode(ExitAirlock, fmt.Errorf("cannot reach the daemon at %s: %w", p.Socket(), err))
			}
			return pipeStdio(conn.(*net.UnixConn), a.stdin, a.stdout)
		},
	}
}

// pipeStdio copies in to conn and conn to out until the daemon closes its
// side: the end of in only half-closes the connection, so the answer to the
// last request still arrives.
func pipeStdio(conn *net.UnixConn, in io.Reader, out io.Writer) error {
	defer conn.Close()
	go func() {
		_, _ = io.Copy(conn, in)
		_ = conn.CloseWrite()
	}()
	// EPIPE: the client closed its end (a stream it stopped reading); that
	// ends the relay as the daemon's end of the answer does.
	if _, err := io.Copy(out, conn); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, syscall.EPIPE) {
		return withCode(ExitAirlock, fmt.Errorf("cannot relay the daemon's answer: %w", err))
	}
	return nil
}
