package engine

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
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
)

// ErrUnreachable is wrapped by the error Connect returns when no Engine answers at the endpoint.
var ErrUnreachable = errors.New("cannot reach the Docker Engine")

// pingTimeout bounds Connect's first request. An ssh endpoint gets sshPingTimeout, since its
// first request also starts ssh and logs in (the CLI gives ssh a 30 s ConnectTimeout).
const (
	pingTimeout    = 5 * time.Second
	sshPingTimeout = 30 * time.Second
)

// Endpoint says how to reach one Docker Engine. It is JSON-encodable (it travels in the daemon's API and store).
type Endpoint struct {
	Context       string `json:"context,omitempty"` // docker context name it came from ("" when from DOCKER_HOST or the default)
	Host          string `json:"host"`              // unix:///var/run/docker.sock, tcp://h:2376, ssh://user@h, npipe...
	TLSCA         string `json:"tls_ca,omitempty"`  // file paths on this host
	TLSCert       string `json:"tls_cert,omitempty"`
	TLSKey        string `json:"tls_key,omitempty"`
	TLSVerify     bool   `json:"tls_verify,omitempty"`      // TLS, verifying the Engine's certificate
	SkipTLSVerify bool   `json:"skip_tls_verify,omitempty"` // TLS without verifying the Engine's certificate
}

// Key is a stable identity for the endpoint: 16 hex digits of the SHA-256 of its JSON form
// without Context, so it is safe as a map key or a label value. It depends only on how the
// Engine is reached: two contexts naming the same host with the same TLS files share a Key.
func (e Endpoint) Key() string {
	e.Context = ""
	b, err := json.Marshal(e) // struct fields encode in a fixed order
	if err != nil {
		panic("engine: marshal endpoint: " + err.Error()) // cannot happen: strings and bools only
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// String is the endpoint for people: its host, and the context it came from if any.
func (e Endpoint) String() string {
	if e.Context == "" {
		return e.Host
	}
	return fmt.Sprintf("%s (context %s)", e.Host, e.Context)
}

// Local reports whether the Engine shares this host's filesystem: true only for a unix socket
// whose path exists on this host as a socket (Docker Desktop's socket included, since Desktop
// shares the host's files with its VM). tcp, ssh and npipe Engines are never local.
func (e Endpoint) Local() bool {
	path, ok := strings.CutPrefix(e.Host, "unix://")
	if !ok || path == "" {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// IsKubernetes reports whether the endpoint names a Kubernetes backend
// ("kubernetes:///NAMESPACE?…", see package kube) rather than a Docker Engine.
func (e Endpoint) IsKubernetes() bool { return strings.HasPrefix(e.Host, "kubernetes:") }

func (e Endpoint) scheme() string {
	s, _, _ := strings.Cut(e.Host, "://")
	return s
}

func (e Endpoint) hasTLSFiles() bool {
	return e.TLSCA != "" || e.TLSCert != "" || e.TLSKey != ""
}

// Connect opens an Engine API client to the endpoint with API-version negotiation: TLS from
// the endpoint's fields (tcp only; sockets never use TLS, as with the CLI), ssh:// through the
// docker CLI's connection helper (`ssh -- host docker system dial-stdio`). It pings the Engine
// (5 s limit; 30 s for ssh) and negotiates the API version from the answer. When the Engine
// does not answer, the error wraps ErrUnreachable and the cause, names the host and says how
// to start an Engine. The caller closes the client.
func (e Endpoint) Connect(ctx context.Context) (*client.Client, error) {
	cli, err := e.Open()
	if err != nil {
		return nil, err
	}
	limit := pingTimeout
	if e.scheme() == "ssh" {
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
	endpoint Endpoint
	cause    error
}

func (u *unreachableError) Error() string {
	// One line, whatever the cause quotes (ssh's stderr has CRLFs).
	cause := strings.Join(strings.Fields(u.cause.Error()), " ")
	return fmt.Sprintf("%s at %s: %s (%s)", ErrUnreachable, u.endpoint, cause, u.endpoint.startHint())
}

func (u *unreachableError) Unwrap() []error { return []error{ErrUnreachable, u.cause} }

// startHint tells how to get an Engine answering at e.
func (e Endpoint) startHint() string {
	const choose = "or choose another Engine with DOCKER_HOST, DOCKER_CONTEXT or `docker context use`"
	switch e.scheme() {
	case "unix", "npipe":
		return "start Docker (`sudo systemctl start docker`, or open Docker Desktop), " + choose
	case "ssh":
		return "start Docker on that host (`sudo systemctl start docker` there), check that `ssh` reaches it without a prompt, " + choose
	default:
		return "start Docker on that host (`sudo systemctl start docker` there) and check that it listens on that address, " + choose
	}
}

func (e Endpoint) clientOpts() ([]client.Opt, error) {
	if e.Host == "" {
		return nil, errors.New("no host")
	}
	base := []client.Opt{client.WithAPIVersionNegotiation()}
	switch e.scheme() {
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
	if !e.TLSVerify && !e.SkipTLSVerify && !e.hasTLSFiles() {
		return opts, nil
	}
	cfg, err := e.tlsConfig()
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
func (e Endpoint) tlsConfig() (*tls.Config, error) {
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
func (e Endpoint) Open() (*client.Client, error) {
	clientOpts, err := e.clientOpts()
	if err != nil {
		return nil, fmt.Errorf("docker endpoint %s: %w", e, err)
	}
	cli, err := client.NewClientWithOpts(clientOpts...)
	if err != nil {
		return nil, fmt.Errorf("docker endpoint %s: %w", e, err)
	}
	return cli, nil
}
