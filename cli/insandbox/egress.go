package insandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/exitcode"

	"github.com/airlock-dev/airlock/egress"
)

// egressShutdownGrace is how long a stopping proxy lets requests and tunnels
// in flight finish before it closes them.
const egressShutdownGrace = 5 * time.Second

// EgressProxyCommand is the hidden egress proxy of a sandbox with
// [sandbox.egress] (issue 14): run by the runtime beside the sandbox, not by
// people. Stdout carries one JSON line per denied request and nothing else.
func EgressProxyCommand(o IO) *cobra.Command {
	var (
		listen string
		dns    string
		allow  []string
		shared bool
		linger time.Duration
	)
	cmd := &cobra.Command{
		Use:    "egress-proxy [--listen ADDR] [--dns ADDR] [--allow ENTRY]...",
		Short:  "Forward HTTP and HTTPS (CONNECT) only to the allowed destinations",
		Long:   "egress-proxy is the sandbox's way out when [sandbox.egress] is set: it forwards absolute-URI HTTP\nrequests and CONNECT tunnels to the destinations of --allow, answers 403 to the others and prints\neach denial on stdout as a JSON line: {\"host\":\"example.com\",\"port\":443,\"method\":\"CONNECT\"}.\nWith --dns it also serves DNS (UDP and TCP): the names of --allow resolve, every other name is NXDOMAIN\nwithout any query leaving.",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if shared {
				return serveShared(o, linger)
			}
			rules, err := egress.ParseRules(allow)
			if err != nil {
				return exitcode.With(exitcode.Usage, fmt.Errorf("invalid --allow entry %w", err))
			}
			ctx, cancel := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT)
			defer cancel()
			l, err := net.Listen("tcp", listen)
			if err != nil {
				return exitcode.With(exitcode.Airlock, fmt.Errorf("egress proxy: cannot listen: %w", err))
			}
			var mu sync.Mutex
			enc := json.NewEncoder(o.Stdout)
			srv := &egress.Server{
				Rules: rules,
				OnDenied: func(d egress.Denial) {
					mu.Lock()
					defer mu.Unlock()
					_ = enc.Encode(d)
				},
				ErrorLog: log.New(o.Stderr, "airlock: ", 0),
			}
			served := make(chan error, 3)
			go func() { served <- srv.Serve(l) }()
			if dns != "" {
				stop, err := serveDNS(dns, rules, srv.ErrorLog, served)
				if err != nil {
					l.Close()
					return exitcode.With(exitcode.Airlock, fmt.Errorf("egress proxy: %w", err))
				}
				defer stop()
			}
			select {
			case err := <-served:
				return exitcode.With(exitcode.Airlock, fmt.Errorf("egress proxy: %w", err))
			case <-ctx.Done():
			}
			sctx, scancel := context.WithTimeout(context.Background(), egressShutdownGrace)
			defer scancel()
			_ = srv.Shutdown(sctx) // what did not finish in time is closed
			if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
				return exitcode.With(exitcode.Airlock, fmt.Errorf("egress proxy: %w", err))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", ":"+strconv.Itoa(egress.DefaultPort), "address to listen on")
	f.StringVar(&dns, "dns", "", "address to serve DNS on (UDP and TCP): allowed names only; empty: no DNS")
	f.BoolVar(&shared, "shared", false, "serve the sandboxes of a daemon: sites given as JSON commands on stdin (egress.Sites)")
	f.DurationVar(&linger, "linger", 0, "with --shared: exit once no site was served this long (0: never)")
	f.StringArrayVar(&allow, "allow", nil, "an allowed destination: host, host:port or *.domain (repeatable; none: deny everything)")
	return cmd
}

// serveDNS serves the egress resolver on addr (UDP and TCP) until the returned
// stop is called; an error that ends a server is sent on failed.
func serveDNS(addr string, rules []egress.Rule, errLog *log.Logger, failed chan<- error) (stop func(), err error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen for DNS: %w", err)
	}
	l, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("cannot listen for DNS: %w", err)
	}
	r := &egress.Resolver{Rules: rules, ErrorLog: errLog}
	go func() {
		if err := r.ServePacket(pc); err != nil {
			failed <- fmt.Errorf("DNS: %w", err)
		}
	}()
	go func() {
		if err := r.ServeStream(l); err != nil {
			failed <- fmt.Errorf("DNS: %w", err)
		}
	}()
	return func() { pc.Close(); l.Close() }, nil
}

// serveShared is the daemon's shared proxy (docs/egress.md, Implementation):
// sites added and dropped by commands on stdin, replies and denials on stdout.
func serveShared(o IO, linger time.Duration) error {
	ctx, cancel := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT)
	defer cancel()
	s := &egress.Sites{Out: o.Stdout, ErrorLog: log.New(o.Stderr, "airlock: ", 0), Linger: linger}
	if err := s.Serve(ctx, os.Stdin); err != nil {
		return exitcode.With(exitcode.Airlock, fmt.Errorf("egress proxy: %w", err))
	}
	return nil
}
