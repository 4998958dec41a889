// Package kubecontext finds the Kubernetes cluster, context and namespace
// kubectl would use (client-go's loading rules: KUBECONFIG, ~/.kube/config,
// the current context) without reaching the cluster, and names them, with
// what [kubernetes] of config.toml sets on every Pod, in the endpoint the
// daemon's API and store carry: what the CLI sends for a new sandbox and the
// Kubernetes backend opens.
package kubecontext

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/airlock-dev/airlock/engine"
)

// Scheme is the scheme of a Kubernetes backend's endpoint: the daemon's API and
// store carry a backend as an engine.Endpoint, whose Host for a cluster is
// "kubernetes:///NAMESPACE?context=…&kubeconfig=…&image=…".
const Scheme = "kubernetes"

// Config says which cluster, namespace and airlock image a runtime uses.
type Config struct {
	// Kubeconfig is the kubeconfig file ("" for client-go's loading rules:
	// KUBECONFIG, then ~/.kube/config), Context its context ("" for the current one).
	Kubeconfig, Context string
	Namespace           string // default "airlock"
	Image               string // the airlock image the init container copies the supervisor from
	CreateNamespace     bool
	AllowPrivileged     bool // [kubernetes] allow_privileged
	// Pod is what [kubernetes] sets on every Pod: node selector,
	// tolerations, RuntimeClass, ServiceAccount, default resources.
	Pod      PodSettings
	Owner    string // the control daemon's instance key, on every Pod
	HostHome string // what ~ is in a [copies] source ("" for the user's home)
}

// Endpoint is how the daemon's API and store name the backend of cfg. The context
// is the resolved one, so that the daemon reaches the same cluster as the CLI.
func (c Config) Endpoint() engine.Endpoint {
	q := url.Values{}
	if c.Context != "" {
		q.Set("context", c.Context)
	}
	if c.Kubeconfig != "" {
		q.Set("kubeconfig", c.Kubeconfig)
	}
	if c.Image != "" {
		q.Set("image", c.Image)
	}
	if c.AllowPrivileged {
		q.Set("allow_privileged", "true")
	}
	if c.CreateNamespace {
		q.Set("create_namespace", "true")
	}
	if !c.Pod.IsZero() {
		b, _ := json.Marshal(c.Pod)
		q.Set("pod", string(b))
	}
	u := url.URL{Scheme: Scheme, Path: "/" + c.Namespace, RawQuery: q.Encode()}
	return engine.Endpoint{Host: u.String()}
}

// ConfigOf reads a Config back from an endpoint made by Config.Endpoint.
func ConfigOf(ep engine.Endpoint) (Config, error) {
	u, err := url.Parse(ep.Host)
	if err != nil || u.Scheme != Scheme {
		return Config{}, fmt.Errorf("cannot read the Kubernetes backend %q", ep.Host)
	}
	q := u.Query()
	cfg := Config{Namespace: strings.TrimPrefix(u.Path, "/"), Context: q.Get("context"), Kubeconfig: q.Get("kubeconfig"), Image: q.Get("image"),
		AllowPrivileged: q.Get("allow_privileged") == "true", CreateNamespace: q.Get("create_namespace") == "true"}
	if p := q.Get("pod"); p != "" {
		if err := json.Unmarshal([]byte(p), &cfg.Pod); err != nil {
			return Config{}, fmt.Errorf("cannot read the Pod settings of the Kubernetes backend %q: %w", ep.Host, err)
		}
	}
	return cfg, nil
}

// Resolve completes cfg as kubectl would read it (client-go's loading rules)
// without reaching the cluster: the default namespace, the current context and
// the kubeconfig file, so that its endpoint names them.
func Resolve(cfg Config) (Config, error) {
	_, cfg, err := Load(cfg)
	return cfg, err
}

// Load is the client configuration of cfg (client-go's loading rules, as
// kubectl reads them) and cfg completed as Resolve completes it.
func Load(cfg Config) (clientcmd.ClientConfig, Config, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "airlock"
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if cfg.Kubeconfig != "" {
		rules.ExplicitPath = cfg.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: cfg.Context})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, cfg, fmt.Errorf("cannot read the kubeconfig: %w", err)
	}
	if cfg.Context == "" {
		cfg.Context = raw.CurrentContext
	}
	if cfg.Kubeconfig == "" {
		if p := rules.GetDefaultFilename(); p != "" {
			cfg.Kubeconfig = p
		}
	}
	return cc, cfg, nil
}

// PodSettings is what config.toml's [kubernetes] table sets on every Pod of
// a backend (docs/kubernetes.md, "Where Pods run"). It travels in the
// backend's endpoint, as JSON.
type PodSettings struct {
	NodeSelector     map[string]string   `json:"node_selector,omitempty"`
	Tolerations      []corev1.Toleration `json:"tolerations,omitempty"`
	RuntimeClassName string              `json:"runtime_class_name,omitempty"`
	// ServiceAccount is the Pod's ServiceAccount: its identity to the
	// cluster's features (workload identity, its image pull secrets,
	// admission). Its API token is not mounted all the same: the code in a
	// sandbox is not trusted.
	ServiceAccount string `json:"service_account,omitempty"`
	// Resources are the sandbox container's default requests and limits;
	// sandbox.cpus and sandbox.memory take the place of the limits they name.
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// IsZero reports whether s sets nothing.
func (s PodSettings) IsZero() bool {
	return len(s.NodeSelector) == 0 && len(s.Tolerations) == 0 && s.RuntimeClassName == "" && s.ServiceAccount == "" &&
		len(s.Resources.Requests) == 0 && len(s.Resources.Limits) == 0
}
