package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/airlock-dev/airlock/stdiomux"
)

// MuxHello is the first line `airlock daemon dial-stdio --mux` writes, before
// the multiplexed streams: "airlock-mux 1 BUILD_ID GOOS GOARCH".
const MuxHello = "airlock-mux 1"

// missingMark is what the remote script says on stderr when it finds no
// airlock to run, followed by `uname -sm` ("Linux x86_64").
const missingMark = "airlock-remote: missing on "

// RemoteError says why the far side of an ssh:// address cannot serve this
// client: no airlock there, one too old to multiplex, or another build.
type RemoteError struct {
	// Reason is RemoteMissing, RemoteOlder or RemoteOtherBuild.
	Reason string
	// BuildID is the remote airlock's build (RemoteOtherBuild).
	BuildID string
	// Platform is the remote's `uname -sm` when known ("Linux x86_64").
	Platform string
	// Command is the remote command that was looked for.
	Command string
}

// Reasons of a RemoteError.
const (
	RemoteMissing    = "missing"
	RemoteOlder      = "older"
	RemoteOtherBuild = "other-build"
)

func (e *RemoteError) Error() string {
	switch e.Reason {
	case RemoteMissing:
		return "no airlock there"
	case RemoteOlder:
		return "the airlock there is older than this one (it cannot carry many connections over one ssh)"
	}
	return fmt.Sprintf("the airlock there is build %s, not this one's", e.BuildID)
}

// SSHOptions choose the airlock an ssh:// client runs on the remote.
type SSHOptions struct {
	// Command is the remote airlock, a name on the remote PATH or a path
	// (~/ for the remote home), used as it is; "": this build from the
	// remote's cache (RemoteCachePath), else `airlock` on the remote PATH.
	Command string
	// BuildID is this client's build: the remote's cache is looked up by it,
	// and a remote of another build is a RemoteError.
	BuildID string
}

// remoteCommandRE is what a remote command may be: a name or a path, quoted
// into the remote shell's script as it is.
var remoteCommandRE = regexp.MustCompile(`^(~/)?[A-Za-z0-9_./+@:,=-]+$`)

// buildIDRE is what a build ID may be to name a cache directory.
var buildIDRE = regexp.MustCompile(`^[A-Za-z0-9._+-]+$`)

// CheckRemoteCommand refuses a remote command the ssh:// script cannot use.
func CheckRemoteCommand(cmd string) error {
	if cmd != "" && !remoteCommandRE.MatchString(cmd) {
		return fmt.Errorf("cannot use the remote command %q: want a name or a path (letters, digits and ~/._+-@:,=)", cmd)
	}
	return nil
}

// RemoteCachePath is where a build lives in the remote user's cache, as a
// shell word of the remote's POSIX shell.
func RemoteCachePath(buildID string) string {
	return `"${XDG_CACHE_HOME:-$HOME/.cache}/airlock/bin/` + buildID + `/airlock"`
}

// shellCommand is cmd as a word of the remote script (~/ is $HOME/).
func shellCommand(cmd string) string {
	if rest, ok := strings.CutPrefix(cmd, "~/"); ok {
		return `"$HOME/` + rest + `"`
	}
	return `"` + cmd + `"`
}

// SSHMuxCommand is the command of one multiplexed ssh connection to the
// daemon at an ssh:// address: ssh runs a small POSIX script there that
// starts `daemon dial-stdio --mux` of the airlock o chooses, or says, with
// the remote's `uname -sm`, that there is none (exit 127).
func SSHMuxCommand(address string, o SSHOptions) ([]string, error) {
	argv, err := SSHCommand(address)
	if err != nil {
		return nil, err
	}
	if err := CheckRemoteCommand(o.Command); err != nil {
		return nil, err
	}
	argv = argv[:len(argv)-3] // "airlock daemon dial-stdio"
	return append(argv, "sh", "-c", "'"+RemoteScript(o, "daemon dial-stdio --mux")+"'"), nil
}

// RemoteScript is the remote POSIX script that runs the airlock o chooses
// with args (words without quotes), or says that there is none. It holds no
// single quote, so that it can be quoted for the remote user's shell.
func RemoteScript(o SSHOptions, args string) string {
	var b strings.Builder
	missing := `echo "` + missingMark + `$(uname -sm)" >&2; exit 127`
	switch {
	case o.Command != "" && strings.Contains(o.Command, "/"):
		fmt.Fprintf(&b, `[ -x %s ] || { %s; }; exec %s %s`, shellCommand(o.Command), missing, shellCommand(o.Command), args)
	case o.Command != "":
		fmt.Fprintf(&b, `command -v %s >/dev/null 2>&1 || { %s; }; exec %s %s`, shellCommand(o.Command), missing, shellCommand(o.Command), args)
	default:
		if buildIDRE.MatchString(o.BuildID) {
			fmt.Fprintf(&b, `c=%s; [ -x "$c" ] && exec "$c" %s; `, RemoteCachePath(o.BuildID), args)
		}
		fmt.Fprintf(&b, `command -v airlock >/dev/null 2>&1 || { %s; }; exec airlock %s`, missing, args)
	}
	return b.String()
}

// NewSSHMux returns a client of the daemon at an ssh:// address over one ssh
// connection, whatever the number of requests and streams: `airlock daemon
// dial-stdio --mux` there relays each stream of the connection (stdiomux) to
// the daemon. The connection starts with the first request (or Connect).
func NewSSHMux(address string, o SSHOptions) (*Client, error) {
	argv, err := SSHMuxCommand(address, o)
	if err != nil {
		return nil, err
	}
	return NewCommandMux(argv, o), nil
}

// NewCommandMux is NewSSHMux with the command argv.
func NewCommandMux(argv []string, o SSHOptions) *Client {
	m := &muxDialer{argv: argv, opts: o}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return m.dial(ctx)
		},
		MaxIdleConns:        16,
		MaxIdleConnsPerHost: 16,
	}
	return &Client{base: "http://airlockd", http: &http.Client{Transport: tr}, mux: m}
}

// Connect starts the multiplexed connection of a NewSSHMux client now (a
// *RemoteError when the remote cannot serve it), and nothing for others.
func (c *Client) Connect(ctx context.Context) error {
	if c.mux == nil {
		return nil
	}
	_, err := c.mux.session(ctx)
	return err
}

// Close ends the client's multiplexed connection, if it has one.
func (c *Client) Close() error {
	if c.mux != nil {
		c.mux.close()
	}
	if tr, ok := c.http.Transport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
	return nil
}

// muxDialer holds the one multiplexed connection of a client; a new one
// starts when the last ended.
type muxDialer struct {
	argv []string
	opts SSHOptions

	mu   sync.Mutex
	sess *stdiomux.Session
	conn net.Conn
}

func (m *muxDialer) dial(ctx context.Context) (net.Conn, error) {
	s, err := m.session(ctx)
	if err != nil {
		return nil, err
	}
	return s.Open()
}

func (m *muxDialer) session(ctx context.Context) (*stdiomux.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sess != nil && m.sess.Err() == nil {
		return m.sess, nil
	}
	conn, err := dialCommand(ctx, m.argv)
	if err != nil {
		return nil, err
	}
	br, err := m.hello(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	m.conn = conn
	m.sess = stdiomux.Client(struct {
		io.Reader
		io.Writer
		io.Closer
	}{br, conn, conn})
	return m.sess, nil
}

// hello reads the remote's first line and checks its build.
func (m *muxDialer) hello(ctx context.Context, conn net.Conn) (*bufio.Reader, error) {
	br := bufio.NewReader(conn)
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := br.ReadString('\n')
		ch <- result{line, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		conn.Close()
		<-ch
		return nil, ctx.Err()
	}
	if r.err != nil {
		msg := r.err.Error()
		remote := m.opts.Command
		if remote == "" {
			remote = "airlock"
		}
		if i := strings.Index(msg, missingMark); i >= 0 {
			platform, _, _ := strings.Cut(msg[i+len(missingMark):], "\n")
			return nil, &RemoteError{Reason: RemoteMissing, Platform: strings.TrimSpace(platform), Command: remote}
		}
		if strings.Contains(msg, "unknown flag: --mux") {
			return nil, &RemoteError{Reason: RemoteOlder, Command: remote}
		}
		return nil, fmt.Errorf("cannot connect: %w", r.err)
	}
	fields := strings.Fields(strings.TrimPrefix(r.line, MuxHello))
	if !strings.HasPrefix(r.line, MuxHello+" ") || len(fields) != 3 {
		return nil, fmt.Errorf("cannot connect: the remote command said %q, not the airlock hello", strings.TrimSpace(r.line))
	}
	if m.opts.Command == "" && m.opts.BuildID != "" && fields[0] != m.opts.BuildID {
		return nil, &RemoteError{Reason: RemoteOtherBuild, BuildID: fields[0], Platform: fields[1] + "/" + fields[2], Command: "airlock"}
	}
	return br, nil
}

func (m *muxDialer) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sess != nil {
		m.sess.Close()
		m.sess = nil
	}
	if m.conn != nil {
		m.conn.Close()
		m.conn = nil
	}
}

// IsRemoteError says whether err is (or wraps) a *RemoteError, and gives it.
func IsRemoteError(err error) (*RemoteError, bool) {
	var re *RemoteError
	ok := errors.As(err, &re)
	return re, ok
}
