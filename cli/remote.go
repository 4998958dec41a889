package cli

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/daemonfiles"
)

// hostEnv names the daemon to use instead of this user's local one, as
// -H/--host does (DOCKER_HOST is to the docker CLI what this is to airlock).
const hostEnv = "AIRLOCK_HOST"

// remoteHost is the daemon address of -H/--host, else AIRLOCK_HOST; "" is the
// local daemon (started when it does not run).
func (a *app) remoteHost() string {
	if a.opts.host != "" {
		return a.opts.host
	}
	v, _ := a.getenv(hostEnv)
	return v
}

// hostSource says where the daemon address came from, for errors: -H (or
// --host) as given, else AIRLOCK_HOST=value.
func (a *app) hostSource(address string) string {
	if a.opts.host != "" {
		return fmt.Sprintf("-H %q", address)
	}
	return fmt.Sprintf("%s=%q", hostEnv, address)
}

// hostForms are the daemon addresses airlock takes.
const hostForms = "unix:///path, tcp://host:port, https://host:port, http://127.0.0.1:port or ssh://[user@]host[:port]"

// hostTarget is where a daemon address leads (resolveHost).
type hostTarget struct {
	transport string   // "unix", "tcp" or "ssh"
	path      string   // unix: the socket
	addr      string   // tcp: host:port
	tls       bool     // tcp: TLS
	ca        string   // tcp with TLS: the CA file to trust ("": the system's roots)
	token     string   // tcp: AIRLOCK_TOKEN, sent as a bearer token
	argv      []string // ssh: the command that reaches the daemon
}

// resolveHost is the rule every client of the daemon follows for an address
// (-H, AIRLOCK_HOST, an SDK's host argument); sdk/testdata/hosts.json holds
// its cases, which the SDKs' tests read too:
//   - unix:///path, or /path: a socket on this machine;
//   - ssh://[user@]host[:port]: `ssh … airlock daemon dial-stdio` there (the
//     remote daemon starts on demand; ssh's keys and configuration apply);
//   - tcp://host:port or https://host:port: its TCP listener, with
//     AIRLOCK_TOKEN; TLS for https://, for tcp:// when AIRLOCK_TLS_CA is set
//     (the certificates to trust) and for any host that is not loopback, where
//     a daemon serves nothing else: the token never crosses a network in clear;
//   - http://host:port: plain HTTP, on a loopback host only.
func resolveHost(address string, getenv func(string) (string, bool)) (hostTarget, error) {
	if strings.HasPrefix(address, "/") {
		return hostTarget{transport: "unix", path: address}, nil
	}
	u, err := url.Parse(address)
	if err != nil || u.Scheme == "" {
		return hostTarget{}, fmt.Errorf("cannot use %q: want %s", address, hostForms)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return hostTarget{}, fmt.Errorf("cannot use %q: a daemon address has no query or fragment", address)
	}
	switch u.Scheme {
	case "unix":
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
			return hostTarget{}, fmt.Errorf("cannot use %q: a unix address needs an absolute path (unix:///path/to/airlockd.sock)", address)
		}
		return hostTarget{transport: "unix", path: u.Path}, nil
	case "ssh":
		argv, err := client.SSHCommand(address)
		if err != nil {
			return hostTarget{}, err
		}
		return hostTarget{transport: "ssh", argv: argv}, nil
	case "tcp", "https", "http":
		host := strings.ToLower(u.Hostname())
		port, err := strconv.ParseUint(u.Port(), 10, 16)
		if err != nil || port == 0 || host == "" || (u.Path != "" && u.Path != "/") {
			return hostTarget{}, fmt.Errorf("cannot use %q: want %s://host:port", address, u.Scheme)
		}
		t := hostTarget{transport: "tcp", addr: net.JoinHostPort(host, u.Port())}
		t.token, _ = getenv("AIRLOCK_TOKEN")
		if u.Scheme == "http" {
			if !daemonfiles.Loopback(host) {
				return hostTarget{}, fmt.Errorf("cannot use %q: plain HTTP would send the token in clear off loopback; use https://%s (or tcp://, TLS off loopback)", address, t.addr)
			}
			return t, nil
		}
		t.ca, _ = getenv("AIRLOCK_TLS_CA")
		t.tls = u.Scheme == "https" || t.ca != "" || !daemonfiles.Loopback(host)
		return t, nil
	}
	return hostTarget{}, fmt.Errorf("cannot use %q: unknown scheme %q (want %s)", address, u.Scheme, hostForms)
}

// remoteClient is a client of the daemon at address (resolveHost). A bad
// address is an error naming where it came from (-H or AIRLOCK_HOST).
func (a *app) remoteClient(address string) (*client.Client, error) {
	t, err := resolveHost(address, a.getenv)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), fmt.Sprintf("cannot use %q: ", address))
		return nil, fmt.Errorf("cannot use %s: %s", a.hostSource(address), msg)
	}
	switch {
	case t.transport == "unix":
		return client.New(t.path), nil
	case t.transport == "ssh":
		o, err := a.sshOptions()
		if err != nil {
			return nil, err
		}
		return client.NewSSHMux(address, o)
	case !t.tls:
		return client.NewTCP(t.addr, t.token), nil
	case t.ca == "":
		return client.NewTLS(t.addr, t.token, nil), nil
	}
	cfg, err := client.TLSConfigCA(t.ca)
	if err != nil {
		return nil, fmt.Errorf("cannot use AIRLOCK_TLS_CA: %w", err)
	}
	return client.NewTLS(t.addr, t.token, cfg), nil
}

// remoteDaemonClient connects to the daemon at address and checks that it
// answers.
func (a *app) remoteDaemonClient(ctx context.Context, address string) (*client.Client, error) {
	a.remotes.mu.Lock()
	defer a.remotes.mu.Unlock()
	if c := a.remotes.m[address]; c != nil {
		return c, nil
	}
	c, err := a.newRemoteDaemonClient(ctx, address)
	if err != nil {
		return nil, err
	}
	if a.remotes.m == nil {
		a.remotes.m = map[string]*client.Client{}
	}
	a.remotes.m[address] = c
	return c, nil
}

// remoteClients are the clients of remote daemons one invocation reached.
type remoteClients struct {
	mu sync.Mutex
	m  map[string]*client.Client
}

// newRemoteDaemonClient is remoteDaemonClient for an address not reached yet.
func (a *app) newRemoteDaemonClient(ctx context.Context, address string) (*client.Client, error) {
	c, err := a.remoteClient(address)
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	if strings.HasPrefix(address, "ssh://") {
		// The remote dial-stdio says its hello once its daemon answered.
		if err := a.connectRemote(ctx, c, address); err != nil {
			return nil, err
		}
		return c, nil
	}
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.Health(hctx); err != nil {
		return nil, withCode(ExitAirlock, fmt.Errorf("cannot reach the airlock daemon at %s: %w%s", address, err, tlsHint(address, err)))
	}
	return c, nil
}

// tlsHint is the fix of a TLS mistake err shows in reaching address: a TLS
// port reached as tcp://, a plain one as https://, a certificate of an
// authority this machine does not trust, one that does not name the host.
func tlsHint(address string, err error) string {
	u, perr := url.Parse(address)
	if perr != nil {
		return ""
	}
	msg := err.Error()
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case strings.Contains(msg, "HTTP request to an HTTPS server"):
		return fmt.Sprintf(" (the daemon there speaks TLS: use https://%s, with AIRLOCK_TLS_CA when its certificate is your own)", u.Host)
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return fmt.Sprintf(" (the daemon there speaks plain HTTP, which it serves on loopback only: use tcp://%s)", u.Host)
	case errors.As(err, &unknown) || strings.Contains(msg, "certificate signed by unknown authority"):
		return " (set AIRLOCK_TLS_CA to the PEM file of the certificate, or of the authority, that signed the daemon's: see docs/daemon.md)"
	case errors.As(err, &hostname) || strings.Contains(msg, "doesn't contain any IP SANs") || strings.Contains(msg, "certificate is valid for"):
		return fmt.Sprintf(" (the daemon's certificate does not name %s: make one with it as a subjectAltName, IP: for an address, DNS: for a name; see docs/daemon.md)", u.Hostname())
	}
	return ""
}
