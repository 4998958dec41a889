package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/daemonfiles"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/internal/startup"
	"github.com/airlock-dev/airlock/userconfig"
)

func init() { addCommand(newDaemonCommand) }

func newDaemonCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "The control daemon: start, stop, status, run",
		Long: "The control daemon owns Docker lifecycle work, keeps sandbox IDs and their ordered events in\n" +
			"$XDG_DATA_HOME/airlock/ids.db, reaps leaked sandboxes and stops idle ones. Every command that\n" +
			"needs it starts it; a daemon of another build is replaced without stopping any sandbox.",
		Args: cobra.NoArgs,
	}
	var d daemonArgs
	flags := func(c *cobra.Command) {
		c.Flags().StringVar(&d.host, "host", "", "also listen on TCP at this host")
		c.Flags().IntVar(&d.port, "port", 7777, "TCP port (with --host)")
		c.Flags().StringVar(&d.tokenFile, "token-file", "", "file holding the token TCP clients must send (Authorization: Bearer or Token); a regular file of yours, mode 0600 (else AIRLOCK_TOKEN)")
		c.Flags().StringVar(&d.token, "token", "", "the token itself (deprecated: other local users can read a command line; use --token-file or AIRLOCK_TOKEN)")
		c.Flags().BoolVar(&d.noTokenRefused, "no-token", false, "refused: see --unsafe-no-token")
		_ = c.Flags().MarkHidden("no-token")
		c.Flags().BoolVar(&d.noToken, "unsafe-no-token", false, "UNSAFE: accept TCP clients without a token (every local user, and every process that can reach the address, controls your sandboxes); warns at every start")
		c.Flags().StringVar(&d.tlsCert, "tls-cert", "", "serve TLS on TCP with this certificate (PEM; needed unless --host is loopback)")
		c.Flags().StringVar(&d.tlsKey, "tls-key", "", "the TLS certificate's private key (PEM)")
		c.Flags().BoolVar(&d.removeTokenFile, "remove-token-file", false, "remove the token file once read (the CLI's hand-off to a daemon it starts)")
		_ = c.Flags().MarkHidden("remove-token-file")
	}
	start := &cobra.Command{
		Use:   "start",
		Short: "Start the daemon in the background (no-op when a daemon of this build runs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.daemonStart(&d)
		},
	}
	flags(start)
	run := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon in the foreground (for systemd)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runDaemon(d)
		},
	}
	flags(run)
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop the daemon (SIGTERM, then SIGKILL after 5 s); sandboxes keep running",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.daemonStop()
		},
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Print whether the daemon runs, its PID, build and log",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.daemonStatus()
		},
	}
	cmd.AddCommand(start, run, stop, status, newDaemonDialStdioCommand(a), newDaemonMetricsCommand(a))
	return cmd
}

// daemonStart starts the daemon in the background, or says that one of this
// build runs (replacing one of another build, keeping its listen flags unless
// others are given).
func (a *app) daemonStart(d *daemonArgs) error {
	p, err := a.daemonPaths()
	if err != nil {
		return err
	}
	if err := a.resolveToken(d, false); err != nil {
		return err
	}
	c := client.New(p.Socket())
	if h, err := c.Health(context.Background()); err == nil {
		if h.BuildID == BuildID {
			if d.listenGiven() {
				if err := listenApplied(p, h, *d); err != nil {
					return withCode(ExitFailure, err)
				}
			}
			fmt.Fprintf(a.stdout, "Daemon running (PID %d, build %s, logs: %s)\n", h.PID, h.BuildID, h.LogPath)
			return nil
		}
		old, err := a.replaceDaemon(p, h)
		if err != nil {
			return err
		}
		if !d.listenGiven() {
			*d = old // no listen flags given: keep the replaced daemon's
		}
	}
	if err := a.startDaemon(context.Background(), p, *d); err != nil {
		return err
	}
	h, err := c.Health(context.Background())
	if err != nil {
		return withCode(ExitAirlock, err)
	}
	fmt.Fprintf(a.stdout, "Daemon running (PID %d, build %s, logs: %s)\n", h.PID, h.BuildID, h.LogPath)
	return nil
}

// daemonStop stops the daemon: only a pid that is provably the daemon is
// signalled.
func (a *app) daemonStop() error {
	p, err := a.daemonPaths()
	if err != nil {
		return err
	}
	// Only a pid that is provably the daemon is signalled: the one
	// answering health on the socket, else the pid file's if that
	// process holds the singleton lock (a daemon that hangs). A pid
	// file naming anything else is stale (the pid may be reused).
	st, ok := daemonfiles.ReadState(p)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	h, herr := client.New(p.Socket()).Health(ctx)
	cancel()
	switch {
	case herr == nil:
		st.PID = h.PID
	case ok && daemonfiles.HoldsLock(p, st.PID):
	case daemonfiles.HasPidFile(p):
		daemonfiles.RemoveStalePidFile(p, st.PID)
		fmt.Fprintln(a.stdout, "no daemon running; removed a stale pid file")
		return nil
	default:
		fmt.Fprintln(a.stdout, "Daemon not running")
		return nil
	}
	if err := stopDaemon(p, st.PID); err != nil {
		if errors.Is(err, errNotDaemon) { // it ended meanwhile
			fmt.Fprintln(a.stdout, "Daemon not running")
			return nil
		}
		return withCode(ExitAirlock, err)
	}
	fmt.Fprintf(a.stdout, "Daemon stopped (PID %d)\n", st.PID)
	return nil
}

// daemonStatus prints whether the daemon runs, its PID, build, log, listeners
// and Engines; exit 1 when it does not run.
func (a *app) daemonStatus() error {
	p, err := a.daemonPaths()
	if err != nil {
		return err
	}
	h, err := client.New(p.Socket()).Health(context.Background())
	if err != nil {
		fmt.Fprintf(a.stdout, "Daemon not running (logs: %s)\n", daemonfiles.LogFile(p))
		return exitCode(ExitFailure)
	}
	line := fmt.Sprintf("Daemon running (PID %d, build %s, logs: %s)", h.PID, h.BuildID, h.LogPath)
	if h.BuildID != BuildID {
		line += " [outdated, restart recommended]"
	}
	fmt.Fprintln(a.stdout, line)
	fmt.Fprintf(a.stdout, "Listening on: %s\n", listeners(p))
	// The Engine a new sandbox goes to (as the docker CLI chooses), and
	// the ones the daemon serves sandboxes on.
	if ep, err := engine.Resolve(a.getenv); err == nil {
		fmt.Fprintf(a.stdout, "Engine: %s\n", ep)
	} else {
		fmt.Fprintf(a.stdout, "Engine: %v\n", err)
	}
	if len(h.Engines) > 0 {
		fmt.Fprintf(a.stdout, "Serving sandboxes on: %s\n", strings.Join(h.Engines, ", "))
	}
	return nil
}

// runDaemon is `airlock daemon run`: the daemon in the foreground until
// SIGTERM, run by the entry cmd/airlock handed over (Options.RunDaemon).
func (a *app) runDaemon(d daemonArgs) error {
	p, err := a.paths()
	if err != nil {
		return err
	}
	// Before anything starts (the Engine connection, the lock): the runtime
	// and daemon dirs must be the user's own.
	if err := p.EnsureRuntimeDir(); err != nil {
		return withCode(ExitAirlock, err)
	}
	if err := p.EnsureDaemonDir(); err != nil {
		return withCode(ExitAirlock, err)
	}
	if err := a.resolveToken(&d, true); err != nil {
		return err
	}
	// A config.toml the daemon would refuse is a config error here, before
	// it starts.
	home, _ := a.getenv("HOME")
	if _, err := userconfig.LoadWithHome(p.UserConfig(), home); err != nil {
		return configError(err)
	}
	if a.daemonMain == nil {
		return withCode(ExitAirlock, errors.New("cannot run the daemon: this airlock binary was built without it"))
	}
	level := ""
	if a.opts.logLevelSet {
		level = a.opts.logLevel
	}
	// The daemon runs for long: the collector's usual setting (GOGC's, else
	// 100), not a short command's.
	startup.GCOn()
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	return a.daemonMain(ctx, daemonfiles.Run{
		Listen: daemonfiles.Listen{Host: d.host, Port: d.port, Token: d.token, TokenFile: d.tokenFile, NoToken: d.noToken, TLSCert: d.tlsCert, TLSKey: d.tlsKey},
		Paths:  p, Version: Version, BuildID: BuildID, LogLevel: level, Getenv: a.getenv, Stderr: a.stderr,
	})
}

// resolveToken settles where the TCP token comes from (design.md §8): --token-file
// (a regular file of the user's, mode 0600) or --token, which still works but
// warns (a command line is readable by every local user), else AIRLOCK_TOKEN.
// For `daemon run` (read) the token is read into d.token, and d.tokenFile stays
// only when it is the user's own file (it is then recorded as such in the
// listen options); the CLI's hand-off file is removed once read. For `daemon
// start` the file is only checked, so a bad one is reported here rather than in
// the log of a daemon that did not start.
func (a *app) resolveToken(d *daemonArgs, read bool) error {
	if d.token != "" {
		fmt.Fprintln(a.stderr, "airlock: warning: --token puts the token on the command line, where other local users can read it "+
			"(ps, /proc/PID/cmdline); use --token-file PATH (mode 0600) or AIRLOCK_TOKEN instead")
		if d.tokenFile != "" {
			return withCode(ExitUsage, errors.New("give the token once: --token-file or --token, not both"))
		}
	}
	if d.noTokenRefused {
		return withCode(ExitUsage, errors.New("refusing --no-token: a TCP listener without a token hands the daemon to every local user and every process "+
			"that can reach the address (sandboxes included), which can then create sandboxes mounting your files; give --token-file PATH (mode 0600) "+
			"or AIRLOCK_TOKEN, or --unsafe-no-token if that is what you want"))
	}
	if d.token == "" && d.tokenFile == "" && d.host != "" {
		if v, ok := a.getenv("AIRLOCK_TOKEN"); ok && v != "" {
			d.token = v
		}
	}
	if d.tokenFile != "" {
		if !filepath.IsAbs(d.tokenFile) {
			abs, err := filepath.Abs(d.tokenFile)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			d.tokenFile = abs
		}
		tok, err := daemonfiles.ReadTokenFile(d.tokenFile)
		if err != nil {
			return withCode(ExitUsage, err)
		}
		if read {
			d.token = tok
			if d.removeTokenFile {
				_ = os.Remove(d.tokenFile)
				d.tokenFile, d.removeTokenFile = "", false
			}
		}
	}
	if d.host != "" && !d.noToken && d.token == "" && d.tokenFile == "" {
		return withCode(ExitUsage, errors.New("cannot listen on TCP without a token: give --token-file PATH (mode 0600) or AIRLOCK_TOKEN"))
	}
	d.tlsCert, d.tlsKey = absPath(d.tlsCert), absPath(d.tlsKey)
	if _, err := daemonfiles.TLSConfig(d.host, d.tlsCert, d.tlsKey); err != nil {
		return withCode(ExitUsage, err)
	}
	return nil
}

// absPath is p made absolute ("" stays ""): a daemon started again in the
// background reads the same file from another directory.
func absPath(p string) string {
	if p == "" {
		return ""
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}
