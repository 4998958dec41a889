package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrUnreachable is wrapped by the error dial.Connect returns when no Engine answers at the endpoint.
var ErrUnreachable = errors.New("cannot reach the Docker Engine")

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

// HasTLSFiles reports whether the endpoint names any TLS file.
func (e Endpoint) HasTLSFiles() bool {
	return e.TLSCA != "" || e.TLSCert != "" || e.TLSKey != ""
}
