// Package control is the control daemon: a per-user singleton that owns Docker
// lifecycle work, persists sandbox IDs and ordered events, reaps leaked sandboxes
// and serves an HTTP/JSON API on a Unix socket (and optionally TCP).
package control

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nightlyone/lockfile"

	"github.com/airlock-dev/airlock/daemonfiles"
	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/secrets"
	"github.com/airlock-dev/airlock/userconfig"
)

// Options configure a daemon.
type Options struct {
	Paths   *paths.Paths
	Version string
	BuildID string
	// Host and Port add a TCP listener; Token guards it unless NoToken.
	// TokenFile, when the token came from the user's --token-file, is
	// recorded in the listen options instead of the token itself.
	Host      string
	Port      int
	Token     string
	TokenFile string
	NoToken   bool
	// TLSCert and TLSKey (PEM files) make the TCP listener serve TLS; a
	// listener on an address that is not loopback must.
	TLSCert, TLSKey string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// Stderr, when set, receives the log lines too (airlock daemon run).
	Stderr io.Writer
	// Redactor masks known secret values in the log.
	Redactor *secrets.Redactor
	// Service opens the service that runs the API's operations, once the lock is
	// held; nil serves only health (tests).
	Service func() (*Service, error)
	// MCP, when set, serves POST /v1/mcp on every listener, behind the same
	// checks as every route (daemon.Main sets mcpserver's).
	MCP http.Handler
}

// Run runs the daemon until ctx ends. The lock is taken before the socket is
// touched, so a second daemon fails with ErrAlreadyRunning and leaves the first
// and its socket alone. Sandboxes are not stopped when the daemon stops.
func Run(ctx context.Context, o Options) error {
	if o.Host != "" && !o.NoToken && o.Token == "" {
		return errors.New("cannot listen on TCP without a token: give --token-file PATH (mode 0600) or AIRLOCK_TOKEN")
	}
	tlsConfig, err := daemonfiles.TLSConfig(o.Host, o.TLSCert, o.TLSKey)
	if err != nil {
		return err
	}
	l, err := acquireLock(o.Paths)
	if err != nil {
		return err
	}
	defer l.release()
	if err := o.Paths.EnsureDaemonDir(); err != nil {
		return err
	}
	logf, log, err := o.openLog()
	if err != nil {
		return err
	}
	defer logf.Close()
	svc, err := o.openService(log)
	if err != nil {
		return err
	}

	pf, err := lockPidFile(o.Paths)
	if err != nil {
		return err
	}
	defer pf.Unlock()
	if err := writeFileAtomic(daemonfiles.VersionFile(o.Paths), o.BuildID+"\n"); err != nil {
		return err
	}
	defer os.Remove(daemonfiles.VersionFile(o.Paths))
	if err := daemonfiles.WriteListen(o.Paths, o.listen()); err != nil {
		return err
	}
	defer os.Remove(daemonfiles.ListenFile(o.Paths))

	sock := o.Paths.Socket()
	ls := &listeners{}
	if ls.ul, err = listenUnix(sock); err != nil {
		return err
	}
	defer os.Remove(sock)
	srv := newServer(o, log, svc)
	ls.unix = &http.Server{Handler: srv.routes(nil), ReadHeaderTimeout: 10 * time.Second}
	if o.Host != "" {
		if ls.tcp, ls.tl, err = listenTCP(o, log, srv, tlsConfig); err != nil {
			ls.close()
			return err
		}
	}
	// Recovery reconciles the store with Docker before any request is served, so
	// that no client sees the state of before the restart (connections made
	// meanwhile wait in the listeners' backlog).
	if svc != nil {
		if err := svc.start(ctx); err != nil {
			ls.close()
			return err
		}
		defer svc.stop()
	}
	errs := ls.serve()
	if ls.tcp != nil {
		log.Info("listening", "tcp", ls.tl.Addr().String(), "token", !o.NoToken, "tls", tlsConfig != nil)
	}
	log.Info("daemon started", "pid", os.Getpid(), "build", o.BuildID, "version", o.Version, "socket", sock)
	return ls.wait(ctx, log, errs)
}

// openLog opens the daemon's log file (appended to) and its logger, which
// writes to the file and to o.Stderr when set, the token masked.
func (o Options) openLog() (*os.File, *slog.Logger, error) {
	logf, err := os.OpenFile(daemonfiles.LogFile(o.Paths), os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot open the daemon log: %w", err)
	}
	var w io.Writer = logf
	if o.Stderr != nil {
		w = io.MultiWriter(logf, o.Stderr)
	}
	if o.Redactor != nil && o.Token != "" {
		o.Redactor.Add(o.Token)
	}
	return logf, newLogger(w, o.LogLevel, o.Redactor), nil
}

// openService opens the service (nil without o.Service) with log as its log;
// a failure is logged.
func (o Options) openService(log *slog.Logger) (*Service, error) {
	if o.Service == nil {
		return nil, nil
	}
	svc, err := o.Service()
	if err != nil {
		log.Error("cannot start", "error", err.Error())
		return nil, err
	}
	svc.log = log
	return svc, nil
}

// listenUnix listens on the socket sock, mode 0600, after removing a stale
// one. The runtime dir was checked when the lock was taken: it is the user's,
// so no one else can have put the socket (or anything) there. When the socket
// cannot be protected, it is closed and removed.
func listenUnix(sock string) (net.Listener, error) {
	_ = os.Remove(sock) // stale: we hold the lock, so no live daemon uses it
	ul, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w", sock, err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		ul.Close()
		os.Remove(sock)
		return nil, fmt.Errorf("cannot protect %s: %w", sock, err)
	}
	return ul, nil
}

// listenTCP listens on o.Host:o.Port, its connections capped (and served with
// TLS given tlsConfig), and returns the HTTP server for it: srv's routes behind
// the Host check.
func listenTCP(o Options, log *slog.Logger, srv *server, tlsConfig *tls.Config) (*http.Server, net.Listener, error) {
	// What TCP clients hold must never take the files the Unix socket
	// and the Engine need: the soft limit is raised to the hard one, and
	// TCP gets a quarter of it at most.
	fileLimit := raiseFileLimit()
	total, perSource := tcpConnCaps(fileLimit)
	raw, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot listen on %s:%d: %w", o.Host, o.Port, err)
	}
	hosts := newHostCheck(o.Host, raw.Addr().(*net.TCPAddr), tlsConfig)
	var tl net.Listener = newCapListener(raw, total, perSource, log)
	if tlsConfig != nil {
		tl = tls.NewListener(tl, tlsConfig)
	}
	// Timeouts on a request's headers and on an idle keep-alive
	// connection, none on a body or a response: attached execs, streamed
	// execs and followed events last as long as they last.
	ts := &http.Server{Handler: srv.routes(hosts), ReadHeaderTimeout: tcpReadHeaderTimeout, IdleTimeout: tcpIdleTimeout,
		MaxHeaderBytes: tcpMaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	log.Info("TCP connection caps", "open_files_limit", fileLimit, "max", total, "per_source_max", perSource)
	if o.NoToken {
		log.Warn(daemonfiles.TokenlessWarning(o.Host, raw.Addr().(*net.TCPAddr).Port))
	}
	return ts, tl, nil
}

// listeners are the daemon's HTTP servers and what they serve on: the Unix
// socket's, and the TCP listener's when there is one.
type listeners struct {
	unix *http.Server
	ul   net.Listener
	tcp  *http.Server // nil without a TCP listener
	tl   net.Listener
}

// close closes the listeners before they are served.
func (ls *listeners) close() {
	ls.ul.Close()
	if ls.tl != nil {
		ls.tl.Close()
	}
}

// serve serves every listener; the channel gets what each Serve returns.
func (ls *listeners) serve() chan error {
	errs := make(chan error, 2)
	go func() { errs <- ls.unix.Serve(ls.ul) }()
	if ls.tcp != nil {
		go func() { errs <- ls.tcp.Serve(ls.tl) }()
	}
	return errs
}

// wait waits until ctx ends, then shuts the servers down (3 s at most), or
// until a server fails, whose error it returns.
func (ls *listeners) wait(ctx context.Context, log *slog.Logger, errs chan error) error {
	select {
	case <-ctx.Done():
	case err := <-errs:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("server failed", "error", err.Error())
			return err
		}
	}
	log.Info("daemon stopping")
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = ls.unix.Shutdown(sctx)
	if ls.tcp != nil {
		_ = ls.tcp.Shutdown(sctx)
	}
	return nil
}

// newLogger is the daemon's structured JSON log. Known secret values are
// masked twice: in the message and every string attribute before the JSON
// handler encodes them (so a value with quotes, backslashes or newlines, which
// the encoding escapes, is still found), and in the encoded line (cheap, and a
// value that only appears once the line is whole is caught too).
func newLogger(w io.Writer, level string, r *secrets.Redactor) *slog.Logger {
	if r != nil {
		w = r.Writer(w)
	}
	lvl, _ := userconfig.ParseLogLevel(level) // the CLI checked it; info otherwise
	var h slog.Handler = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})
	if r != nil {
		h = r.Handler(h)
	}
	return slog.New(h)
}

// listen are o's listen options, as the daemon records them.
func (o Options) listen() daemonfiles.Listen {
	l := daemonfiles.Listen{Host: o.Host, Port: o.Port, TokenFile: o.TokenFile, NoToken: o.NoToken, TLSCert: o.TLSCert, TLSKey: o.TLSKey}
	if l.TokenFile == "" {
		l.Token = o.Token
	}
	return l
}

// lockPidFile writes the pid file as a nightlyone/lockfile (design.md §8). The
// caller holds the singleton flock, so a pid file already there is stale: one
// naming a dead process is replaced by lockfile itself; one whose pid now
// belongs to another process (a reused pid) is removed here.
func lockPidFile(p *paths.Paths) (lockfile.Lockfile, error) {
	path, err := filepath.Abs(daemonfiles.PidFile(p))
	if err != nil {
		return "", err
	}
	pf, err := lockfile.New(path)
	if err != nil {
		return "", err
	}
	for attempt := 0; ; attempt++ {
		err = pf.TryLock()
		if err == nil {
			return pf, nil
		}
		if attempt == 3 {
			return "", fmt.Errorf("cannot write the pid file %s: %w", path, err)
		}
		if errors.Is(err, lockfile.ErrBusy) {
			_ = os.Remove(path)
		}
	}
}

// writeFileAtomic writes content (mode 0600) with paths.WriteFileAtomic.
func writeFileAtomic(path, content string) error {
	if err := paths.WriteFileAtomic(path, []byte(content), 0o600); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}
