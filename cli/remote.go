package cli

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control"
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
const hostForms = "unix:///path, tcp://host:port, https://host:port or ssh://[user@]host[:port]"

// remoteClient is a client of the daemon at address:
//   - unix:///path: a socket on this machine;
//   - ssh://[user@]host[:port]: `ssh … airlock daemon dial-stdio` there (the
//     remote daemon starts on demand; ssh's keys and configuration apply);
//   - tcp://host:port or https://host:port: its TCP listener, with
//     AIRLOCK_TOKEN; TLS for https://, for tcp:// when AIRLOCK_TLS_CA is set
//     (the certificates to trust) and for any host that is not loopback, where
//     a daemon serves nothing else.
//
// A bad address is an error naming where it came from (-H or AIRLOCK_HOST).
func (a *app) remoteClient(address string) (*client.Client, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("cannot use %s: %s", a.hostSource(address), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(address)
	if err != nil || u.Scheme == "" {
		return nil, bad("want %s", hostForms)
	}
	switch u.Scheme {
	case "unix":
		if u.Path == "" {
			return nil, bad("a unix address needs a path (unix:///path/to/airlockd.sock)")
		}
		return client.New(u.Path), nil
	case "ssh":
		c, err := client.NewSSH(address)
		if err != nil {
			return nil, bad("%s", strings.TrimPrefix(err.Error(), fmt.Sprintf("cannot use %q: ", address)))
		}
		return c, nil
	case "tcp", "https":
		if u.Port() == "" || u.Hostname() == "" || (u.Path != "" && u.Path != "/") {
			return nil, bad("want %s://host:port", u.Scheme)
		}
		addr := net.JoinHostPort(u.Hostname(), u.Port())
		token, _ := a.getenv("AIRLOCK_TOKEN")
		ca, _ := a.getenv("AIRLOCK_TLS_CA")
		if u.Scheme == "tcp" && ca == "" && control.Loopback(u.Hostname()) {
			return client.NewTCP(addr, token), nil
		}
		if ca == "" {
			return client.NewTLS(addr, token, nil), nil
		}
		cfg, err := client.TLSConfigCA(ca)
		if err != nil {
			return nil, fmt.Errorf("cannot use AIRLOCK_TLS_CA: %w", err)
		}
		return client.NewTLS(addr, token, cfg), nil
	}
	return nil, bad("unknown scheme %q (want %s)", u.Scheme, hostForms)
}

// remoteDaemonClient connects to the daemon at address and checks that it
// answers.
func (a *app) remoteDaemonClient(ctx context.Context, address string) (*client.Client, error) {
	c, err := a.remoteClient(address)
	if err != nil {
		return nil, withCode(ExitUsage, err)
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
