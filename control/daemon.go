// Package control is the control daemon: a per-user singleton that owns Docker
// lifecycle work, persists sandbox IDs and ordered events, reaps leaked sandboxes
// and serves an HTTP/JSON API on a Unix socket (and optionally TCP).
package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/secrets"
)

// Options configure a daemon.
type Options struct {
	Paths   *paths.Paths
	Version string
	BuildID string
	// Host and Port add a TCP listener; Token guards it unless NoToken.
	Host    string
	Port    int
	Token   string
	NoToken bool
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// Stderr, when set, receives the log lines too (airlock daemon run).
	Stderr io.Writer
	// Redactor masks known secret values in the log.
	Redactor *secrets.Redactor
	// Service opens the service that runs the API's operations, once the lock is
	// held; nil serves only health (tests).
	Service func() (*Service, error)
}

// Files of the daemon (DESIGN §2).
func pidFile(p *paths.Paths) string     { return filepath.Join(p.DaemonDir(), "airlockd.pid") }
func versionFile(p *paths.Paths) string { return filepath.Join(p.DaemonDir(), "airlockd.version") }

// LogFile is the daemon's structured JSON log.
func LogFile(p *paths.Paths) string { return filepath.Join(p.DaemonDir(), "airlockd.log") }

// Run runs the daemon until ctx ends. The lock is taken before the socket is
// touched, so a second daemon fails with ErrAlreadyRunning and leaves the first
// and its socket alone. Sandboxes are not stopped when the daemon stops.
func Run(ctx context.Context, o Options) error {
	if o.Host != "" && !o.NoToken && o.Token == "" {
		return errors.New("cannot listen on TCP without a token: give --token or --no-token")
	}
	l, err := acquireLock(o.Paths.Lock())
	if err != nil {
		return err
	}
	defer l.release()
	if err := os.MkdirAll(o.Paths.DaemonDir(), 0o700); err != nil {
		return fmt.Errorf("cannot create %s: %w", o.Paths.DaemonDir(), err)
	}
	logf, err := os.OpenFile(LogFile(o.Paths), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("cannot open the daemon log: %w", err)
	}
	defer logf.Close()
	var w io.Writer = logf
	if o.Stderr != nil {
		w = io.MultiWriter(logf, o.Stderr)
	}
	if o.Redactor != nil {
		w = o.Redactor.Writer(w)
	}
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: parseLevel(o.LogLevel)}))
	var svc *Service
	if o.Service != nil {
		if svc, err = o.Service(); err != nil {
			log.Error("cannot start", "error", err.Error())
			return err
		}
		svc.log = log
	}

	if err := writeFileAtomic(pidFile(o.Paths), strconv.Itoa(os.Getpid())+"\n"); err != nil {
		return err
	}
	defer os.Remove(pidFile(o.Paths))
	if err := writeFileAtomic(versionFile(o.Paths), o.BuildID+"\n"); err != nil {
		return err
	}
	defer os.Remove(versionFile(o.Paths))

	sock := o.Paths.Socket()
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		return fmt.Errorf("cannot create %s: %w", filepath.Dir(sock), err)
	}
	_ = os.Remove(sock) // stale: we hold the lock, so no live daemon uses it
	ul, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", sock, err)
	}
	defer os.Remove(sock)
	if err := os.Chmod(sock, 0o600); err != nil {
		ul.Close()
		return fmt.Errorf("cannot protect %s: %w", sock, err)
	}

	srv := &server{opts: o, log: log, svc: svc}
	hs := &http.Server{Handler: srv.routes(false), ReadHeaderTimeout: 10 * time.Second}
	errs := make(chan error, 2)
	var ts *http.Server
	var tl net.Listener
	if o.Host != "" {
		tl, err = net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
		if err != nil {
			ul.Close()
			return fmt.Errorf("cannot listen on %s:%d: %w", o.Host, o.Port, err)
		}
		ts = &http.Server{Handler: srv.routes(true), ReadHeaderTimeout: 10 * time.Second}
	}
	// Recovery reconciles the store with Docker before any request is served, so
	// that no client sees the state of before the restart (connections made
	// meanwhile wait in the listeners' backlog).
	if svc != nil {
		if err := svc.start(ctx); err != nil {
			ul.Close()
			if tl != nil {
				tl.Close()
			}
			return err
		}
		defer svc.stop()
	}
	go func() { errs <- hs.Serve(ul) }()
	if ts != nil {
		go func() { errs <- ts.Serve(tl) }()
		log.Info("listening", "tcp", tl.Addr().String(), "token", !o.NoToken)
	}
	log.Info("daemon started", "pid", os.Getpid(), "build", o.BuildID, "version", o.Version, "socket", sock)
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
	_ = hs.Shutdown(sctx)
	if ts != nil {
		_ = ts.Shutdown(sctx)
	}
	return nil
}

func parseLevel(s string) slog.Level {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

func writeFileAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

// State is what the files of a running daemon say about it.
type State struct {
	PID     int
	BuildID string
	LogPath string
}

// ReadState reads the pid and version files; ok is false when there are none.
func ReadState(p *paths.Paths) (State, bool) {
	st := State{LogPath: LogFile(p)}
	b, err := os.ReadFile(pidFile(p))
	if err != nil {
		return st, false
	}
	st.PID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	v, _ := os.ReadFile(versionFile(p))
	st.BuildID = strings.TrimSpace(string(v))
	return st, st.PID > 0
}
