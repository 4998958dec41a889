package engine

import "github.com/airlock-dev/airlock/client"

// ToWire is ep as the daemon's API carries it (client.Engine).
func ToWire(ep Endpoint) *client.Engine {
	e := &client.Engine{Context: ep.Context, Host: ep.Host, TLSCA: ep.TLSCA, TLSCert: ep.TLSCert, TLSKey: ep.TLSKey,
		TLSVerify: ep.TLSVerify, SkipTLSVerify: ep.SkipTLSVerify}
	if k := ep.Kubernetes; k != nil {
		e.Kubernetes = &client.Kubernetes{Namespace: k.Namespace, Context: k.Context, Kubeconfig: k.Kubeconfig, Image: k.Image,
			AllowPrivileged: k.AllowPrivileged, CreateNamespace: k.CreateNamespace}
		if p := k.Pod; p != nil {
			e.Kubernetes.Pod = &client.KubePod{NodeSelector: p.NodeSelector, RuntimeClassName: p.RuntimeClassName, ServiceAccount: p.ServiceAccount,
				Resources: (*client.KubeResources)(p.Resources)}
			for _, t := range p.Tolerations {
				e.Kubernetes.Pod.Tolerations = append(e.Kubernetes.Pod.Tolerations, client.KubeToleration(t))
			}
		}
	}
	return e
}

// FromWire is the endpoint an API request or answer names (the zero one for
// nil), normalised (Normalize: a cluster packed in Host, as earlier CLIs and
// daemons send it, read into the typed form). When it cannot be normalised,
// the error says why and the endpoint is returned as it came.
func FromWire(e *client.Engine) (Endpoint, error) {
	if e == nil {
		return Endpoint{}, nil
	}
	ep := Endpoint{Context: e.Context, Host: e.Host, TLSCA: e.TLSCA, TLSCert: e.TLSCert, TLSKey: e.TLSKey,
		TLSVerify: e.TLSVerify, SkipTLSVerify: e.SkipTLSVerify}
	if k := e.Kubernetes; k != nil {
		ep.Kubernetes = &Kubernetes{Namespace: k.Namespace, Context: k.Context, Kubeconfig: k.Kubeconfig, Image: k.Image,
			AllowPrivileged: k.AllowPrivileged, CreateNamespace: k.CreateNamespace}
		if p := k.Pod; p != nil {
			ep.Kubernetes.Pod = &KubePod{NodeSelector: p.NodeSelector, RuntimeClassName: p.RuntimeClassName, ServiceAccount: p.ServiceAccount,
				Resources: (*KubeResources)(p.Resources)}
			for _, t := range p.Tolerations {
				ep.Kubernetes.Pod.Tolerations = append(ep.Kubernetes.Pod.Tolerations, KubeToleration(t))
			}
		}
	}
	n, err := Normalize(ep)
	if err != nil {
		return ep, err
	}
	return n, nil
}
