package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// stdioServerEnv makes this test binary a stand-in for `airlock daemon
// dial-stdio`: it serves the health route over its stdin and stdout.
const stdioServerEnv = "AIRLOCK_CLIENT_TEST_STDIO_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) != "" {
		serveStdio()
		return
	}
	if build := os.Getenv(muxServerEnv); build != "" {
		serveMux(build)
		return
	}
	os.Exit(m.Run())
}

// serveStdio serves one HTTP connection on stdin and stdout.
func serveStdio() {
	l := &oneConnListener{conn: stdioConn{}, done: make(chan struct{})}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(client.Health{PID: os.Getpid(), BuildID: "over-stdio"})
	})
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			l.close()
		}
	}}
	go func() { _ = srv.Serve(l) }()
	<-l.done
}

type oneConnListener struct {
	conn   net.Conn
	used   bool
	mu     sync.Mutex
	done   chan struct{}
	closed sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if !l.used {
		l.used = true
		l.mu.Unlock()
		return l.conn, nil
	}
	l.mu.Unlock()
	<-l.done
	return nil, errors.New("closed")
}
func (l *oneConnListener) close()         { l.closed.Do(func() { close(l.done) }) }
func (l *oneConnListener) Close() error   { l.close(); return nil }
func (l *oneConnListener) Addr() net.Addr { return stdioAddr{} }

type stdioConn struct{}

func (stdioConn) Read(p []byte) (int, error)       { return os.Stdin.Read(p) }
func (stdioConn) Write(p []byte) (int, error)      { return os.Stdout.Write(p) }
func (stdioConn) Close() error                     { return os.Stdout.Close() }
func (stdioConn) LocalAddr() net.Addr              { return stdioAddr{} }
func (stdioConn) RemoteAddr() net.Addr             { return stdioAddr{} }
func (stdioConn) SetDeadline(time.Time) error      { return nil }
func (stdioConn) SetReadDeadline(time.Time) error  { return nil }
func (stdioConn) SetWriteDeadline(time.Time) error { return nil }

type stdioAddr struct{}

func (stdioAddr) Network() string { return "stdio" }
func (stdioAddr) String() string  { return "stdio" }

// TestNewCommand: a client speaks the API over a command's stdin and stdout
// (what ssh … airlock daemon dial-stdio gives), several requests in turn; a
// command that fails says why.
func TestNewCommand(t *testing.T) {
	t.Setenv(stdioServerEnv, "1")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewCommand([]string{self})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 3 {
		h, err := c.Health(ctx)
		if err != nil || h.BuildID != "over-stdio" {
			t.Fatalf("request %d over a command's stdio: %+v, %v", i, h, err)
		}
	}

	bad := client.NewCommand([]string{"sh", "-c", "echo 'ssh: connect to host box port 22: Connection refused' >&2; exit 255"})
	if _, err := bad.Health(ctx); err == nil || !strings.Contains(err.Error(), "Connection refused") {
		t.Errorf("a command that fails: %v, want its stderr in the error", err)
	}
	missing := client.NewCommand([]string{"/nonexistent/airlock-ssh"})
	if _, err := missing.Health(ctx); err == nil || !strings.Contains(err.Error(), "/nonexistent/airlock-ssh") {
		t.Errorf("a command that does not exist: %v", err)
	}
}

// TestSSHCommand: the ssh command of an ssh:// address; bad addresses refused.
func TestSSHCommand(t *testing.T) {
	for addr, want := range map[string][]string{
		"ssh://box":              {"ssh", "-T", "--", "box", "airlock", "daemon", "dial-stdio"},
		"ssh://me@box.example":   {"ssh", "-T", "-l", "me", "--", "box.example", "airlock", "daemon", "dial-stdio"},
		"ssh://me@10.0.0.2:2222": {"ssh", "-T", "-l", "me", "-p", "2222", "--", "10.0.0.2", "airlock", "daemon", "dial-stdio"},
	} {
		if got, err := client.SSHCommand(addr); err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %q, %v; want %q", addr, got, err, want)
		}
	}
	for _, addr := range []string{"tcp://box:22", "ssh://", "ssh://box/path", "ssh://box:99999", "box"} {
		if _, err := client.SSHCommand(addr); err == nil {
			t.Errorf("%s: accepted", addr)
		}
	}
}
