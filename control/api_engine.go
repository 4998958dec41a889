package control

import (
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/engine"
)

// endpointFromWire is the endpoint a request names (nil for none), normalised
// (engine.Normalize): a cluster packed in Host, as earlier CLIs send it, is
// read into the typed form.
func endpointFromWire(e *client.Engine) (*engine.Endpoint, error) {
	if e == nil {
		return nil, nil
	}
	ep := engine.Endpoint{Context: e.Context, Host: e.Host, TLSCA: e.TLSCA, TLSCert: e.TLSCert, TLSKey: e.TLSKey,
		TLSVerify: e.TLSVerify, SkipTLSVerify: e.SkipTLSVerify}
	if k := e.Kubernetes; k != nil {
		ep.Kubernetes = &engine.Kubernetes{Namespace: k.Namespace, Context: k.Context, Kubeconfig: k.Kubeconfig, Image: k.Image,
			AllowPrivileged: k.AllowPrivileged, CreateNamespace: k.CreateNamespace}
		if p := k.Pod; p != nil {
			ep.Kubernetes.Pod = &engine.KubePod{NodeSelector: p.NodeSelector, RuntimeClassName: p.RuntimeClassName, ServiceAccount: p.ServiceAccount,
				Resources: (*engine.KubeResources)(p.Resources)}
			for _, t := range p.Tolerations {
				ep.Kubernetes.Pod.Tolerations = append(ep.Kubernetes.Pod.Tolerations, engine.KubeToleration(t))
			}
		}
	}
	n, err := engine.Normalize(ep)
	if err != nil {
		return nil, errorf(ErrInvalidRequest, "engine: %v", err)
	}
	return &n, nil
}

// wireEngine is the API's view of an endpoint.
func wireEngine(ep engine.Endpoint) *client.Engine {
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
