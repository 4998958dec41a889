package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Kubernetes names a Kubernetes backend in an Endpoint: the cluster (a
// kubeconfig file and its context), the namespace its Pods go in, the airlock
// image, and what config.toml's [kubernetes] sets on every Pod. Package
// kubecontext makes it, as kubectl would find the cluster, and reads it back
// for the backend.
type Kubernetes struct {
	Namespace       string   `json:"namespace"`
	Context         string   `json:"context,omitempty"`    // the kube context ("" for the kubeconfig's current one)
	Kubeconfig      string   `json:"kubeconfig,omitempty"` // the kubeconfig file on the daemon's host ("" for client-go's loading rules)
	Image           string   `json:"image,omitempty"`      // the airlock image the init container copies the supervisor from
	AllowPrivileged bool     `json:"allow_privileged,omitempty"`
	CreateNamespace bool     `json:"create_namespace,omitempty"`
	Pod             *KubePod `json:"pod,omitempty"` // nil when [kubernetes] sets nothing on the Pods
}

// KubePod is what config.toml's [kubernetes] sets on every Pod of a backend
// (docs/kubernetes.md, "Where Pods run"), with its keys. Quantities are
// Kubernetes quantities ("250m", "2Gi"), read by the backend.
type KubePod struct {
	NodeSelector     map[string]string `json:"node_selector,omitempty"`
	Tolerations      []KubeToleration  `json:"tolerations,omitempty"`
	RuntimeClassName string            `json:"runtime_class_name,omitempty"`
	ServiceAccount   string            `json:"service_account,omitempty"`
	Resources        *KubeResources    `json:"resources,omitempty"` // the sandbox container's default requests and limits
}

// KubeToleration is a toleration of the Pods (a Kubernetes Toleration).
type KubeToleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"`
	Seconds  *int64 `json:"toleration_seconds,omitempty"`
}

// KubeResources are quantities by resource name ("cpu", "memory", …).
type KubeResources struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

// IsZero reports whether p sets nothing.
func (p *KubePod) IsZero() bool {
	return p == nil || len(p.NodeSelector) == 0 && len(p.Tolerations) == 0 && p.RuntimeClassName == "" && p.ServiceAccount == "" &&
		(p.Resources == nil || len(p.Resources.Requests) == 0 && len(p.Resources.Limits) == 0)
}

// Earlier versions of airlock named a cluster in the endpoint's Host, packed
// as a URL: "kubernetes:///NAMESPACE?context=…&kubeconfig=…&image=…
// &allow_privileged=true&create_namespace=true&pod=<JSON>", the Pod settings
// in the JSON of Kubernetes' own types. Normalize reads that form (requests
// of an earlier CLI, records of an earlier daemon), and a cluster's Key is
// still the Key of that form, so that what an earlier daemon recorded and
// labelled under it is found again.

// packedScheme is the scheme of the packed form.
const packedScheme = "kubernetes"

// packedPod is the Pod settings' JSON in the packed form: Kubernetes' field
// names (tolerationSeconds), its resources always written, limits first.
type packedPod struct {
	NodeSelector     map[string]string  `json:"node_selector,omitempty"`
	Tolerations      []packedToleration `json:"tolerations,omitempty"`
	RuntimeClassName string             `json:"runtime_class_name,omitempty"`
	ServiceAccount   string             `json:"service_account,omitempty"`
	Resources        struct {
		Limits   map[string]string `json:"limits,omitempty"`
		Requests map[string]string `json:"requests,omitempty"`
	} `json:"resources"`
}

type packedToleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"`
	Seconds  *int64 `json:"tolerationSeconds,omitempty"`
}

// packed is k in the packed form, as earlier versions wrote it.
func (k *Kubernetes) packed() string {
	q := url.Values{}
	if k.Context != "" {
		q.Set("context", k.Context)
	}
	if k.Kubeconfig != "" {
		q.Set("kubeconfig", k.Kubeconfig)
	}
	if k.Image != "" {
		q.Set("image", k.Image)
	}
	if k.AllowPrivileged {
		q.Set("allow_privileged", "true")
	}
	if k.CreateNamespace {
		q.Set("create_namespace", "true")
	}
	if p := k.Pod; !p.IsZero() {
		pp := packedPod{NodeSelector: p.NodeSelector, RuntimeClassName: p.RuntimeClassName, ServiceAccount: p.ServiceAccount}
		for _, t := range p.Tolerations {
			pp.Tolerations = append(pp.Tolerations, packedToleration(t))
		}
		if p.Resources != nil {
			pp.Resources.Limits, pp.Resources.Requests = p.Resources.Limits, p.Resources.Requests
		}
		b, err := json.Marshal(pp)
		if err != nil {
			panic("engine: marshal Pod settings: " + err.Error()) // cannot happen: strings, maps of strings and ints only
		}
		q.Set("pod", string(b))
	}
	u := url.URL{Scheme: packedScheme, Path: "/" + k.Namespace, RawQuery: q.Encode()}
	return u.String()
}

// isPacked reports whether host is a cluster in the packed form.
func isPacked(host string) bool { return strings.HasPrefix(host, packedScheme+":") }

// unpack reads a cluster in the packed form.
func unpack(host string) (*Kubernetes, error) {
	u, err := url.Parse(host)
	if err != nil || u.Scheme != packedScheme {
		return nil, fmt.Errorf("cannot read the Kubernetes backend %q", host)
	}
	q := u.Query()
	k := &Kubernetes{Namespace: strings.TrimPrefix(u.Path, "/"), Context: q.Get("context"), Kubeconfig: q.Get("kubeconfig"), Image: q.Get("image"),
		AllowPrivileged: q.Get("allow_privileged") == "true", CreateNamespace: q.Get("create_namespace") == "true"}
	if s := q.Get("pod"); s != "" {
		var pp packedPod
		if err := json.Unmarshal([]byte(s), &pp); err != nil {
			return nil, fmt.Errorf("cannot read the Pod settings of the Kubernetes backend %q: %w", host, err)
		}
		p := &KubePod{NodeSelector: pp.NodeSelector, RuntimeClassName: pp.RuntimeClassName, ServiceAccount: pp.ServiceAccount}
		for _, t := range pp.Tolerations {
			p.Tolerations = append(p.Tolerations, KubeToleration(t))
		}
		if len(pp.Resources.Limits) > 0 || len(pp.Resources.Requests) > 0 {
			p.Resources = &KubeResources{Limits: pp.Resources.Limits, Requests: pp.Resources.Requests}
		}
		if !p.IsZero() {
			k.Pod = p
		}
	}
	return k, nil
}

// Normalize is ep as the daemon keeps it, for an endpoint read from its API
// or its store: a cluster in the packed form of earlier versions ("kubernetes:///NAMESPACE?…"
// in Host) becomes the typed Kubernetes, Host emptied; any other endpoint is
// returned as it is. It refuses an endpoint that names both a host and a
// cluster, and a packed form it cannot read.
func Normalize(ep Endpoint) (Endpoint, error) {
	switch {
	case ep.Kubernetes != nil && ep.Host != "":
		return ep, errors.New("cannot use an endpoint that names both a host and a Kubernetes cluster")
	case ep.Kubernetes == nil && isPacked(ep.Host):
		k, err := unpack(ep.Host)
		if err != nil {
			return ep, err
		}
		ep.Host, ep.Kubernetes = "", k
	}
	return ep, nil
}
