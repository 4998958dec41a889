// Package daemonfiles is what the control daemon and the programs that start,
// find and stop it share: the daemon's files in its directory (pid, build,
// listen options, log, token hand-off), its singleton lock as seen from
// outside, and the rules of its TCP listener (token file, TLS, loopback). It
// holds none of the daemon's workings.
package daemonfiles

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/paths"
)

// PidFile, VersionFile and ListenFile are a running daemon's pid, build ID
// and listen options (design.md §2).
func PidFile(p *paths.Paths) string     { return filepath.Join(p.DaemonDir(), "airlockd.pid") }
func VersionFile(p *paths.Paths) string { return filepath.Join(p.DaemonDir(), "airlockd.version") }
func ListenFile(p *paths.Paths) string  { return filepath.Join(p.DaemonDir(), "airlockd.listen") }

// TokenHandoffFile is where the CLI leaves a token given by value (--token,
// AIRLOCK_TOKEN) for the daemon it starts in the background, which reads and
// removes it: a token never goes on a child's command line or environment.
func TokenHandoffFile(p *paths.Paths) string { return filepath.Join(p.DaemonDir(), "airlockd.token") }

// LogFile is the daemon's structured JSON log.
func LogFile(p *paths.Paths) string { return filepath.Join(p.DaemonDir(), "airlockd.log") }

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

// WriteListen records l as the running daemon's listen options.
func WriteListen(p *paths.Paths, l Listen) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return writeFileAtomic(ListenFile(p), string(b)+"\n")
}

// ReadListen returns the listen options of the running daemon; ok is false
// when it left none (it is not running, or it predates them).
func ReadListen(p *paths.Paths) (Listen, bool) {
	var l Listen
	b, err := os.ReadFile(ListenFile(p))
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
	_, err := os.Lstat(PidFile(p))
	return err == nil
}

// RemoveStalePidFile removes a pid file that names no running daemon: the
// caller found that no daemon answers and that pid, what the file said when it
// read it (0 for nothing usable), does not hold the lock. The file is removed
// only if it still says so, so a daemon starting meanwhile keeps its own; the
// version and listen files go too when no daemon holds the lock at all.
func RemoveStalePidFile(p *paths.Paths, pid int) {
	b, err := os.ReadFile(PidFile(p))
	if err != nil {
		return
	}
	now, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if now != pid && (now > 0 || pid > 0) {
		return
	}
	_ = os.Remove(PidFile(p))
	if !lockHeld(p) {
		_ = os.Remove(VersionFile(p))
		_ = os.Remove(ListenFile(p))
	}
}

// ReadState reads the pid and version files; ok is false when there are none.
func ReadState(p *paths.Paths) (State, bool) {
	st := State{LogPath: LogFile(p)}
	b, err := os.ReadFile(PidFile(p))
	if err != nil {
		return st, false
	}
	st.PID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	v, _ := os.ReadFile(VersionFile(p))
	st.BuildID = strings.TrimSpace(string(v))
	return st, st.PID > 0
}

// TLSConfig is the TLS of a TCP listener on host with the certificate and key
// files given (nil for plain HTTP). A plain listener is allowed on loopback
// only: elsewhere the token, and every secret in a request, would cross the
// network in the clear.
func TLSConfig(host, certFile, keyFile string) (*tls.Config, error) {
	if host == "" {
		if certFile != "" || keyFile != "" {
			return nil, errors.New("cannot use --tls-cert or --tls-key without --host: only the TCP listener serves TLS")
		}
		return nil, nil
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("cannot serve TLS: give both --tls-cert FILE and --tls-key FILE")
	}
	if certFile == "" {
		if !Loopback(host) {
			return nil, fmt.Errorf("cannot listen on %s without TLS: the token and the secrets in requests would cross the network in the clear; "+
				"give --tls-cert FILE and --tls-key FILE, or listen on 127.0.0.1 and reach the daemon over ssh (airlock daemon dial-stdio)", host)
		}
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("cannot load the TLS certificate %s and key %s: %w", certFile, keyFile, err)
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

// Run is what starts a daemon in this process (`airlock daemon run`): its
// listen options, the token read (Token; TokenFile only when it is the user's
// own file), and what the command line knows.
type Run struct {
	Listen
	Paths            *paths.Paths
	Version, BuildID string
	// LogLevel is --log-level when given, else "" (config.toml's
	// runtime.log_level); debug also traces the Engine calls on Stderr.
	LogLevel string
	// Getenv reads the environment (DOCKER_HOST, AIRLOCK_SUPERVISOR_BINARY…).
	Getenv func(string) (string, bool)
	// Stderr receives the log lines too, unless the daemon runs in the
	// background (AIRLOCK_DAEMON_BACKGROUND=1: it is the log file then).
	Stderr io.Writer
}
