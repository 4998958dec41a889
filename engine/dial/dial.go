// Package dial opens Engine API clients to an endpoint package engine found:
// TLS, ssh through the docker CLI's connection helper, the first ping. What
// only resolves an endpoint (the command line) does not import it.
package dial

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/docker/cli/cli/connhelper"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/tlsconfig"

	"github.com/airlock-dev/airlock/engine"
)

// pingTimeout bounds Connect's first request. An ssh endpoint gets sshPingTimeout, since its
// first request also starts ssh and logs in (the CLI gives ssh a 30 s ConnectTimeout).
const (
	pingTimeout    = 5 * time.Second
	sshPingTimeout = 30 * time.Second
)

func scheme(e engine.Endpoint) string {
	s, _, _ := strings.Cut(e.Host, "://")
	return s
}

// Connect opens an Engine API client to the endpoint with API-version negotiation: TLS from
// the endpoint's fields (tcp only; sockets never use TLS, as with the CLI), ssh:// through the
// docker CLI's connection helper (`ssh -- host docker system dial-stdio`). It pings the Engine
// (5 s limit; 30 s for ssh) and negotiates the API version from the answer. When the Engine
// does not answer, the error wraps ErrUnreachable and the cause, names the host and says how
// to start an Engine. The caller closes the client.
func Connect(ctx context.Context, e engine.Endpoint) (*client.Client, error) {
	cli, err := Open(e)
	if err != nil {
		return nil, err
	}
	limit := pingTimeout
	if scheme(e) == "ssh" {
		limit = sshPingTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	ping, err := cli.Ping(pctx)
	if err != nil {
		_ = cli.Close()
		return nil, &unreachableError{endpoint: e, cause: err}
	}
	cli.NegotiateAPIVersionPing(ping)
	return cli, nil
}

// unreachableError is Connect's error when the Engine does not answer; it wraps
// ErrUnreachable and the cause.
type unreachableError struct {
	endpoint engine.Endpoint
	cause    error
}

func (u *unreachableError) Error() string {
	// One line, whatever the cause quotes (ssh's stderr has CRLFs).
	cause := strings.Join(strings.Fields(u.cause.Error()), " ")
	return fmt.Sprintf("%s at %s: %s (%s)", engine.ErrUnreachable, u.endpoint, cause, startHint(u.endpoint))
}

func (u *unreachableError) Unwrap() []error { return []error{engine.ErrUnreachable, u.cause} }

// startHint tells how to get an Engine answering at e.
func startHint(e engine.Endpoint) string {
	const choose = "or choose another Engine with DOCKER_HOST, DOCKER_CONTEXT or `docker context use`"
	switch scheme(e) {
	case "unix", "npipe":
		return "start Docker (`sudo systemctl start docker`, or open Docker Desktop), " + choose
	case "ssh":
		return "start Docker on that host (`sudo systemctl start docker` there), check that `ssh` reaches it without a prompt, " + choose
	default:
		return "start Docker on that host (`sudo systemctl start docker` there) and check that it listens on that address, " + choose
	}
}

func clientOpts(e engine.Endpoint) ([]client.Opt, error) {
	if e.Host == "" {
		return nil, errors.New("no host")
	}
	base := []client.Opt{client.WithAPIVersionNegotiation()}
	switch scheme(e) {
	case "ssh":
		helper, err := connhelper.GetConnectionHelper(e.Host)
		if err != nil {
			return nil, err
		}
		return append(base,
			client.WithHTTPClient(&http.Client{Transport: &http.Transport{DialContext: helper.Dialer}}),
			client.WithHost(helper.Host),
			client.WithDialContext(helper.Dialer),
		), nil
	case "unix", "npipe", "fd":
		return append(base, client.WithHost(e.Host)), nil
	}
	opts := append(base, client.WithHost(e.Host))
	if !e.TLSVerify && !e.SkipTLSVerify && !e.HasTLSFiles() {
		return opts, nil
	}
	cfg, err := tlsConfig(e)
	if err != nil {
		return nil, err
	}
	return append(opts, func(c *client.Client) error {
		// After WithHost, the client's transport is an *http.Transport set up for e.Host.
		tr, ok := c.HTTPClient().Transport.(*http.Transport)
		if !ok {
			return fmt.Errorf("cannot apply TLS to transport %T", c.HTTPClient().Transport)
		}
		tr.TLSClientConfig = cfg
		return nil
	}), nil
}

// tlsConfig is the docker CLI's TLS setup for an endpoint: only the endpoint's CA when one is
// given (else the system's roots), its client certificate, verification unless SkipTLSVerify.
func tlsConfig(e engine.Endpoint) (*tls.Config, error) {
	var tlsOpts []func(*tls.Config)
	if e.TLSCA != "" {
		ca, err := os.ReadFile(e.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("TLS CA %s holds no PEM certificate", e.TLSCA)
		}
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.RootCAs = pool })
	}
	if (e.TLSCert == "") != (e.TLSKey == "") {
		return nil, errors.New("TLS client certificate and key must be given together")
	}
	if e.TLSCert != "" {
		certPEM, err := os.ReadFile(e.TLSCert)
		if err != nil {
			return nil, fmt.Errorf("TLS certificate: %w", err)
		}
		keyPEM, err := os.ReadFile(e.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("TLS key: %w", err)
		}
		if block, _ := pem.Decode(keyPEM); block == nil {
			return nil, fmt.Errorf("TLS key %s holds no PEM block", e.TLSKey)
		} else if x509.IsEncryptedPEMBlock(block) { //nolint:staticcheck // detecting, not decrypting
			return nil, fmt.Errorf("TLS key %s is encrypted; Docker no longer supports encrypted keys", e.TLSKey)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("TLS certificate %s and key %s: %w", e.TLSCert, e.TLSKey, err)
		}
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.Certificates = []tls.Certificate{pair} })
	}
	if e.SkipTLSVerify {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.InsecureSkipVerify = true })
	}
	return tlsconfig.ClientDefault(tlsOpts...), nil
}

// Open returns an Engine API client for the endpoint without reaching the Engine:
// the API version is negotiated on the first request. For a long-lived process
// (the control daemon) that must not fail when an Engine is down for a moment.
func Open(e engine.Endpoint) (*client.Client, error) {
	clientOpts, err := clientOpts(e)
	if err != nil {
		return nil, fmt.Errorf("docker endpoint %s: %w", e, err)
	}
	cli, err := client.NewClientWithOpts(clientOpts...)
	if err != nil {
		return nil, fmt.Errorf("docker endpoint %s: %w", e, err)
	}
	return cli, nil
}
