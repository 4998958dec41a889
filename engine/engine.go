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

// Endpoint says where sandboxes run: one Docker Engine (Host and its TLS files), or a Kubernetes
// cluster (Kubernetes set, Host empty). It is JSON-encodable (it travels in the daemon's API and store).
type Endpoint struct {
	Context       string `json:"context,omitempty"` // docker context name it came from ("" when from DOCKER_HOST or the default)
	Host          string `json:"host"`              // unix:///var/run/docker.sock, tcp://h:2376, ssh://user@h, npipe...; "" for a cluster
	TLSCA         string `json:"tls_ca,omitempty"`  // file paths on this host
	TLSCert       string `json:"tls_cert,omitempty"`
	TLSKey        string `json:"tls_key,omitempty"`
	TLSVerify     bool   `json:"tls_verify,omitempty"`      // TLS, verifying the Engine's certificate
	SkipTLSVerify bool   `json:"skip_tls_verify,omitempty"` // TLS without verifying the Engine's certificate
	// Kubernetes, when set, names a Kubernetes backend rather than a Docker Engine.
	Kubernetes *Kubernetes `json:"kubernetes,omitempty"`
}

// Key is a stable identity for the endpoint: 16 hex digits of the SHA-256 of its JSON form
// without Context, so it is safe as a map key or a label value. It depends only on how the
// Engine is reached: two contexts naming the same host with the same TLS files share a Key.
// A cluster's Key is that of the packed form earlier versions carried in Host (kubernetes.go),
// so that it is the same whichever form the endpoint came in, and the same as before.
func (e Endpoint) Key() string {
	e.Context = ""
	if e.Kubernetes != nil {
		e.Host, e.Kubernetes = e.Kubernetes.packed(), nil
	}
	b, err := json.Marshal(e) // struct fields encode in a fixed order
	if err != nil {
		panic("engine: marshal endpoint: " + err.Error()) // cannot happen: strings and bools only (the cluster packed in Host)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// String is the endpoint for people: its host (a cluster in the packed form,
// "kubernetes:///NAMESPACE?context=…"), and the context it came from if any.
func (e Endpoint) String() string {
	host := e.Host
	if e.Kubernetes != nil {
		host = e.Kubernetes.packed()
	}
	if e.Context == "" {
		return host
	}
	return fmt.Sprintf("%s (context %s)", host, e.Context)
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

// IsKubernetes reports whether the endpoint names a Kubernetes backend (its
// Kubernetes is set) rather than a Docker Engine. An endpoint read from the API
// or a record is normalised first (Normalize), the packed form made typed.
func (e Endpoint) IsKubernetes() bool { return e.Kubernetes != nil }

// IsZero reports whether the endpoint names no Engine and no cluster (an API
// request's engine left empty: the daemon's own).
func (e Endpoint) IsZero() bool { return e.Host == "" && e.Kubernetes == nil }

// HasTLSFiles reports whether the endpoint names any TLS file.
func (e Endpoint) HasTLSFiles() bool {
	return e.TLSCA != "" || e.TLSCert != "" || e.TLSKey != ""
}
