package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// NewCommand returns a client that speaks the API over the standard input and
// output of a command, one process per connection: `ssh user@host airlock
// daemon dial-stdio` reaches a daemon on another machine (as the docker CLI's
// ssh:// hosts do with `docker system dial-stdio`).
func NewCommand(argv []string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialCommand(ctx, argv)
		},
		MaxIdleConns: 2,
	}
	return &Client{base: "http://airlockd", http: &http.Client{Transport: tr}}
}

// NewSSH returns a client of the daemon of the user on the host of an
// ssh://[user@]host[:port] address, through `ssh … airlock daemon dial-stdio`
// there (ssh's own configuration and keys apply).
func NewSSH(address string) (*Client, error) {
	argv, err := SSHCommand(address)
	if err != nil {
		return nil, err
	}
	return NewCommand(argv), nil
}

// SSHCommand is the command NewSSH runs for an ssh:// address.
func SSHCommand(address string) ([]string, error) {
	u, err := url.Parse(address)
	if err != nil || u.Scheme != "ssh" || u.Hostname() == "" {
		return nil, fmt.Errorf("cannot use %q: want ssh://[user@]host[:port]", address)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return nil, fmt.Errorf("cannot use %q: an ssh address has no path or query", address)
	}
	argv := []string{"ssh", "-T"}
	if u.User != nil && u.User.Username() != "" {
		argv = append(argv, "-l", u.User.Username())
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return nil, fmt.Errorf("cannot use %q: bad port %q", address, p)
		}
		argv = append(argv, "-p", p)
	}
	return append(argv, "--", u.Hostname(), "airlock", "daemon", "dial-stdio"), nil
}

// dialCommand starts argv and returns its stdin and stdout as a connection.
func dialCommand(ctx context.Context, argv []string) (net.Conn, error) {
	if len(argv) == 0 {
		return nil, errors.New("cannot connect: no command")
	}
	// Not CommandContext: the connection outlives the dial's context.
	cmd := exec.Command(argv[0], argv[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// Our own pipe for stderr: a read of stdout that ends must be able to
	// wait for what the command said there (exec copies a non-file Stderr
	// on a goroutine of its own, which may not have run yet).
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c := &commandConn{cmd: cmd, stdin: stdin, stdout: stdout, stderr: &boundedBuffer{max: 4 << 10}, stderrDone: make(chan struct{})}
	cmd.Stderr = errW
	err = cmd.Start()
	errW.Close()
	if err != nil {
		errR.Close()
		return nil, fmt.Errorf("cannot start %s: %w", argv[0], err)
	}
	go func() {
		defer close(c.stderrDone)
		defer errR.Close()
		_, _ = io.Copy(c.stderr, errR)
	}()
	if err := ctx.Err(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// commandConn is a command's stdin and stdout as a net.Conn. Deadlines are
// not supported (the HTTP client does not need them here).
type commandConn struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *boundedBuffer
	// stderrDone is closed when the command's stderr ends.
	stderrDone chan struct{}
	once       sync.Once
}

func (c *commandConn) Read(p []byte) (int, error) {
	n, err := c.stdout.Read(p)
	if errors.Is(err, io.EOF) {
		return n, c.ended(err)
	}
	return n, err
}

func (c *commandConn) Write(p []byte) (int, error) {
	n, err := c.stdin.Write(p)
	if err != nil {
		// The command ended before it read the request.
		return n, c.ended(err)
	}
	return n, nil
}

// ended returns err with what the command said on stderr (ssh's errors) once
// the command's stdin or stdout ended.
func (c *commandConn) ended(err error) error {
	select {
	case <-c.stderrDone:
	case <-time.After(time.Second):
		// Something the command started holds its stderr open.
	}
	if msg := c.stderr.String(); msg != "" {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}

// CloseWrite ends the command's stdin.
func (c *commandConn) CloseWrite() error { return c.stdin.Close() }

// Close ends the command (it is killed if it does not end with its stdin).
func (c *commandConn) Close() error {
	c.once.Do(func() {
		_ = c.stdin.Close()
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	})
	return nil
}

func (c *commandConn) LocalAddr() net.Addr              { return commandAddr{} }
func (c *commandConn) RemoteAddr() net.Addr             { return commandAddr{} }
func (c *commandConn) SetDeadline(time.Time) error      { return nil }
func (c *commandConn) SetReadDeadline(time.Time) error  { return nil }
func (c *commandConn) SetWriteDeadline(time.Time) error { return nil }

type commandAddr struct{}

func (commandAddr) Network() string { return "command" }
func (commandAddr) String() string  { return "command" }

// boundedBuffer keeps the first max bytes written to it.
type boundedBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.b); room > 0 {
		b.b = append(b.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b)
}
