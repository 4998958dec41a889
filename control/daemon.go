// Package control is the control daemon: a per-user singleton that owns Docker
// lifecycle work, persists sandbox IDs and ordered events, reaps leaked sandboxes
// and serves an HTTP/JSON API on a Unix socket (and optionally TCP).
package control

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nightlyone/lockfile"

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
}

// Files of the daemon (design.md §2).
func pidFile(p *paths.Paths) string     { return filepath.Join(p.DaemonDir(), "airlockd.pid") }
func versionFile(p *paths.Paths) string { return filepath.Join(p.DaemonDir(), "airlockd.version") }
func listenFile(p *paths.Paths) string  { return filepath.Join(p.DaemonDir(), "airlockd.listen") }

// TokenHandoffFile is where the CLI leaves a token given by value (--token,
// AIRLOCK_TOKEN) for the daemon it starts in the background, which reads and
// removes it: a token never goes on a child's command line or environment.
func TokenHandoffFile(p *paths.Paths) string { return filepath.Join(p.DaemonDir(), "airlockd.token") }

// LogFile is the daemon's structured JSON log.
func LogFile(p *paths.Paths) string { return filepath.Join(p.DaemonDir(), "airlockd.log") }

// Run runs the daemon until ctx ends. The lock is taken before the socket is
// touched, so a second daemon fails with ErrAlreadyRunning and leaves the first
// and its socket alone. Sandboxes are not stopped when the daemon stops.
func Run(ctx context.Context, o Options) error {
	if o.Host != "" && !o.NoToken && o.Token == "" {
		return errors.New("cannot listen on TCP without a token: give --token-file PATH (mode 0600) or AIRLOCK_TOKEN")
	}
	tlsConfig, err := o.TLSConfig()
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
	logf, err := os.OpenFile(LogFile(o.Paths), os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("cannot open the daemon log: %w", err)
	}
	defer logf.Close()
	var w io.Writer = logf
	if o.Stderr != nil {
		w = io.MultiWriter(logf, o.Stderr)
	}
	if o.Redactor != nil && o.Token != "" {
		o.Redactor.Add(o.Token)
	}
	log := newLogger(w, o.LogLevel, o.Redactor)
	var svc *Service
	if o.Service != nil {
		if svc, err = o.Service(); err != nil {
			log.Error("cannot start", "error", err.Error())
			return err
		}
		svc.log = log
	}

	pf, err := lockPidFile(o.Paths)
	if err != nil {
		return err
	}
	defer pf.Unlock()
	if err := writeFileAtomic(versionFile(o.Paths), o.BuildID+"\n"); err != nil {
		return err
	}
	defer os.Remove(versionFile(o.Paths))
	if err := writeListen(o.Paths, o.listen()); err != nil {
		return err
	}
	defer os.Remove(listenFile(o.Paths))

	// The runtime dir was checked when the lock was taken: it is the user's,
	// so no one else can have put the socket (or anything) there.
	sock := o.Paths.Socket()
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
	hs := &http.Server{Handler: srv.routes(nil), ReadHeaderTimeout: 10 * time.Second}
	errs := make(chan error, 2)
	var ts *http.Server
	var tl net.Listener
	if o.Host != "" {
		// What TCP clients hold must never take the files the Unix socket
		// and the Engine need: the soft limit is raised to the hard one, and
		// TCP gets a quarter of it at most.
		fileLimit := raiseFileLimit()
		total, perSource := tcpConnCaps(fileLimit)
		raw, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
		if err != nil {
			ul.Close()
			return fmt.Errorf("cannot listen on %s:%d: %w", o.Host, o.Port, err)
		}
		hosts := newHostCheck(o.Host, raw.Addr().(*net.TCPAddr), tlsConfig)
		tl = newCapListener(raw, total, perSource, log)
		if tlsConfig != nil {
			tl = tls.NewListener(tl, tlsConfig)
		}
		// Timeouts on a request's headers and on an idle keep-alive
		// connection, none on a body or a response: attached execs, streamed
		// execs and followed events last as long as they last.
		ts = &http.Server{Handler: srv.routes(hosts), ReadHeaderTimeout: tcpReadHeaderTimeout, IdleTimeout: tcpIdleTimeout,
			MaxHeaderBytes: tcpMaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
		log.Info("TCP connection caps", "open_files_limit", fileLimit, "max", total, "per_source_max", perSource)
		if o.NoToken {
			log.Warn(TokenlessWarning(o.Host, raw.Addr().(*net.TCPAddr).Port))
		}
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
		log.Info("listening", "tcp", tl.Addr().String(), "token", !o.NoToken, "tls", tlsConfig != nil)
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

// lockPidFile writes the pid file as a nightlyone/lockfile (design.md §8). The
// caller holds the singleton flock, so a pid file already there is stale: one
// naming a dead process is replaced by lockfile itself; one whose pid now
// belongs to another process (a reused pid) is removed here.
func lockPidFile(p *paths.Paths) (lockfile.Lockfile, error) {
	path, err := filepath.Abs(pidFile(p))
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

// Listen are a daemon's listen options. A running daemon keeps them in
// airlockd.listen (mode 0600, beside its pid and version files), so that a CLI
// replacing it (auto-upgrade) starts the new one with the same options.
type Listen struct {
	Host string `json:"host,omitempty"`
	Port int    `json:"port,omitempty"`
	// TokenFile is the user's --token-file; Token the token itself when it
	// was given by value (--token, AIRLOCK_TOKEN).
	TokenFile string `json:"token_file,omitempty"`
	Token     string `json:"token,omitempty"`
	NoToken   bool   `json:"no_token,omitempty"`
	TLSCert   string `json:"tls_cert,omitempty"`
	TLSKey    string `json:"tls_key,omitempty"`
}

func (o Options) listen() Listen {
	l := Listen{Host: o.Host, Port: o.Port, TokenFile: o.TokenFile, NoToken: o.NoToken, TLSCert: o.TLSCert, TLSKey: o.TLSKey}
	if l.TokenFile == "" {
		l.Token = o.Token
	}
	return l
}

func writeListen(p *paths.Paths, l Listen) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return writeFileAtomic(listenFile(p), string(b)+"\n")
}

// ReadListen returns the listen options of the running daemon; ok is false
// when it left none (it is not running, or it predates them).
func ReadListen(p *paths.Paths) (Listen, bool) {
	var l Listen
	b, err := os.ReadFile(listenFile(p))
	if err != nil || json.Unmarshal(b, &l) != nil {
		return Listen{}, false
	}
	return l, true
}

// WriteTokenHandoff leaves token in TokenHandoffFile (mode 0600) for a daemon
// started with --token-file on it and --remove-token-file.
func WriteTokenHandoff(p *paths.Paths, token string) (string, error) {
	if err := p.EnsureDaemonDir(); err != nil {
		return "", err
	}
	path := TokenHandoffFile(p)
	return path, writeFileAtomic(path, token+"\n")
}

// ReadTokenFile reads a TCP token from path (--token-file): a regular file of
// the current user's that no one else may read or write (mode 0600), holding
// the token (surrounding white space removed).
func ReadTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot read the token file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("cannot read the token file: %w", err)
	}
	bad := func(why string) error {
		return fmt.Errorf("refusing the token file %s: it %s; it must be a regular file of yours with mode 0600 (chmod 600 %s)", path, why, path)
	}
	if !st.Mode().IsRegular() {
		return "", bad("is not a regular file")
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return "", bad(fmt.Sprintf("belongs to uid %d, not to you (uid %d)", sys.Uid, os.Getuid()))
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", bad(fmt.Sprintf("has mode %04o, which lets others read or change it", perm))
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", fmt.Errorf("cannot read the token file %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("the token file %s is empty", path)
	}
	return tok, nil
}

// writeFileAtomic writes content (mode 0600) with paths.WriteFileAtomic.
func writeFileAtomic(path, content string) error {
	if err := paths.WriteFileAtomic(path, []byte(content), 0o600); err != nil {
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

// HasPidFile reports whether a pid file is there, whatever it holds.
func HasPidFile(p *paths.Paths) bool {
	_, err := os.Lstat(pidFile(p))
	return err == nil
}

// RemoveStalePidFile removes a pid file that names no running daemon: the
// caller found that no daemon answers and that pid, what the file said when it
// read it (0 for nothing usable), does not hold the lock. The file is removed
// only if it still says so, so a daemon starting meanwhile keeps its own; the
// version and listen files go too when no daemon holds the lock at all.
func RemoveStalePidFile(p *paths.Paths, pid int) {
	b, err := os.ReadFile(pidFile(p))
	if err != nil {
		return
	}
	now, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if now != pid && (now > 0 || pid > 0) {
		return
	}
	_ = os.Remove(pidFile(p))
	if !lockHeld(p) {
		_ = os.Remove(versionFile(p))
		_ = os.Remove(listenFile(p))
	}
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

// TLSConfig is the TCP listener's TLS (nil for plain HTTP). A plain listener
// is allowed on loopback only: elsewhere the token, and every secret in a
// request, would cross the network in the clear.
func (o Options) TLSConfig() (*tls.Config, error) {
	if o.Host == "" {
		if o.TLSCert != "" || o.TLSKey != "" {
			return nil, errors.New("cannot use --tls-cert or --tls-key without --host: only the TCP listener serves TLS")
		}
		return nil, nil
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return nil, errors.New("cannot serve TLS: give both --tls-cert FILE and --tls-key FILE")
	}
	if o.TLSCert == "" {
		if !Loopback(o.Host) {
			return nil, fmt.Errorf("cannot listen on %s without TLS: the token and the secrets in requests would cross the network in the clear; "+
				"give --tls-cert FILE and --tls-key FILE, or listen on 127.0.0.1 and reach the daemon over ssh (airlock daemon dial-stdio)", o.Host)
		}
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("cannot load the TLS certificate %s and key %s: %w", o.TLSCert, o.TLSKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// TokenlessWarning is the warning of every start of a TCP listener without a
// token (--unsafe-no-token).
func TokenlessWarning(host string, port int) string {
	return fmt.Sprintf("the TCP listener on %s accepts requests without a token (--unsafe-no-token): every local user, "+
		"and every process that can reach that address (sandboxes included), can create sandboxes mounting your files and run commands in them",
		net.JoinHostPort(host, strconv.Itoa(port)))
}

// Loopback reports whether a listen host is a loopback address ("localhost"
// included); a name is not resolved, so any other name is not.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
