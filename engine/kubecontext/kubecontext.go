// Package kubecontext finds the Kubernetes cluster, context and namespace
// kubectl would use (client-go's loading rules: KUBECONFIG, ~/.kube/config,
// the current context) without reaching the cluster, and names them, with
// what [kubernetes] of config.toml sets on every Pod, in the endpoint the
// daemon's API and store carry (its engine.Kubernetes): what the CLI sends
// for a new sandbox and the Kubernetes backend opens.
package kubecontext

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/airlock-dev/airlock/engine"
)

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
	return engine.Endpoint{Kubernetes: c.Target()}
}

// Target is the cluster of cfg as an endpoint names it: Pod settings none
// when they set nothing, quantities in their canonical form.
func (c Config) Target() *engine.Kubernetes {
	k := &engine.Kubernetes{Namespace: c.Namespace, Context: c.Context, Kubeconfig: c.Kubeconfig, Image: c.Image,
		AllowPrivileged: c.AllowPrivileged, CreateNamespace: c.CreateNamespace}
	if s := c.Pod; !s.IsZero() {
		p := &engine.KubePod{NodeSelector: s.NodeSelector, RuntimeClassName: s.RuntimeClassName, ServiceAccount: s.ServiceAccount}
		for _, t := range s.Tolerations {
			p.Tolerations = append(p.Tolerations, engine.KubeToleration{Key: t.Key, Operator: string(t.Operator), Value: t.Value,
				Effect: string(t.Effect), Seconds: t.TolerationSeconds})
		}
		if len(s.Resources.Requests) > 0 || len(s.Resources.Limits) > 0 {
			p.Resources = &engine.KubeResources{Requests: quantities(s.Resources.Requests), Limits: quantities(s.Resources.Limits)}
		}
		k.Pod = p
	}
	return k
}

// quantities are l's quantities, canonical ("1.5Gi" is "1536Mi"), by name.
func quantities(l corev1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for name, q := range l {
		out[string(name)] = q.String()
	}
	return out
}

// ConfigOf reads a Config back from the endpoint of a Kubernetes backend
// (Config.Endpoint, or the API's or a record's, normalised by engine.Normalize).
func ConfigOf(ep engine.Endpoint) (Config, error) {
	k := ep.Kubernetes
	if k == nil {
		return Config{}, fmt.Errorf("cannot read the Kubernetes backend of %s: the endpoint names a Docker Engine", ep)
	}
	cfg := Config{Namespace: k.Namespace, Context: k.Context, Kubeconfig: k.Kubeconfig, Image: k.Image,
		AllowPrivileged: k.AllowPrivileged, CreateNamespace: k.CreateNamespace}
	if p := k.Pod; p != nil {
		cfg.Pod = PodSettings{NodeSelector: p.NodeSelector, RuntimeClassName: p.RuntimeClassName, ServiceAccount: p.ServiceAccount}
		for _, t := range p.Tolerations {
			cfg.Pod.Tolerations = append(cfg.Pod.Tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator),
				Value: t.Value, Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.Seconds})
		}
		if r := p.Resources; r != nil {
			var err error
			if cfg.Pod.Resources.Requests, err = resourceList(r.Requests); err != nil {
				return Config{}, fmt.Errorf("cannot read the Pod settings of the Kubernetes backend %s: requests: %w", ep, err)
			}
			if cfg.Pod.Resources.Limits, err = resourceList(r.Limits); err != nil {
				return Config{}, fmt.Errorf("cannot read the Pod settings of the Kubernetes backend %s: limits: %w", ep, err)
			}
		}
	}
	return cfg, nil
}

// resourceList reads quantities by name.
func resourceList(m map[string]string) (corev1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(corev1.ResourceList, len(m))
	for name, v := range m {
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s: invalid quantity %q: %w", name, v, err)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
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
// a backend (docs/kubernetes.md, "Where Pods run"), in Kubernetes' types. It
// travels in the backend's endpoint as an engine.KubePod.
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
