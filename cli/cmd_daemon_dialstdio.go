package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"syscall"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/stdiomux"

	"github.com/spf13/cobra"
)

// newDaemonDialStdioCommand is `airlock daemon dial-stdio`: the API of this
// user's daemon (started when it is not running) on stdin and stdout, for a
// client on another machine that runs it over ssh (as `docker system
// dial-stdio` serves the docker CLI's ssh:// hosts).
func newDaemonDialStdioCommand(a *app) *cobra.Command {
	var mux bool
	cmd := &cobra.Command{
		Use:   "dial-stdio",
		Short: "Speak the daemon's API on stdin and stdout (for a remote client over ssh)",
		Long: "dial-stdio connects stdin and stdout to this user's control daemon, starting it when it does not run:\n" +
			"a client on another machine reaches the API with `ssh user@host airlock daemon dial-stdio`.\n" +
			"With --mux it first writes the line \"airlock-mux 1 BUILD_ID GOOS GOARCH\", then carries many\n" +
			"connections to the daemon over stdin and stdout at once (the client of an ssh:// address uses one ssh\n" +
			"connection so). See docs/daemon.md.",
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
			if mux {
				return serveMux(ctx, p.Socket(), a.stdin, a.stdout)
			}
			var d net.Dialer
			conn, err := d.DialContext(ctx, "unix", p.Socket())
			if err != nil {
				return withCode(ExitAirlock, fmt.Errorf("cannot reach the daemon at %s: %w", p.Socket(), err))
			}
			return pipeStdio(conn.(*net.UnixConn), a.stdin, a.stdout)
		},
	}
	cmd.Flags().BoolVar(&mux, "mux", false, "carry many connections to the daemon at once (stdiomux), after a hello line")
	return cmd
}

// serveMux writes the hello, then relays each stream the client opens on in
// and out to a connection of its own to the daemon's socket, until the
// client's end (ssh's) closes.
func serveMux(ctx context.Context, socket string, in io.Reader, out io.Writer) error {
	if _, err := fmt.Fprintf(out, "%s %s %s %s\n", client.MuxHello, BuildID, runtime.GOOS, runtime.GOARCH); err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot write the hello: %w", err))
	}
	closer := io.Closer(io.NopCloser(nil))
	if c, ok := out.(io.Closer); ok {
		closer = c
	}
	s := stdiomux.Server(struct {
		io.Reader
		io.Writer
		io.Closer
	}{in, out, closer})
	defer s.Close()
	var relays sync.WaitGroup
	defer relays.Wait()
	for {
		st, err := s.Accept()
		if err != nil {
			return nil // the client's end closed
		}
		relays.Add(1)
		go func() {
			defer relays.Done()
			var d net.Dialer
			conn, err := d.DialContext(ctx, "unix", socket)
			if err != nil {
				_ = st.CloseWithError(fmt.Sprintf("cannot reach the daemon at %s: %v", socket, err))
				return
			}
			relayStream(st, conn.(*net.UnixConn))
		}()
	}
}

// relayStream copies a stream and a connection to the daemon both ways; each
// end of input half-closes the other side, and both close once both ways
// ended (or either fails).
func relayStream(st *stdiomux.Stream, conn *net.UnixConn) {
	defer st.Close()
	defer conn.Close()
	up := make(chan struct{})
	go func() {
		defer close(up)
		if _, err := io.Copy(conn, st); err != nil {
			_ = conn.Close() // the stream failed: end the daemon's side too
			return
		}
		_ = conn.CloseWrite()
	}()
	if _, err := io.Copy(st, conn); err != nil {
		_ = st.Close()
	} else {
		_ = st.CloseWrite()
	}
	<-up
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
