//go:build !nokube

package cli

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/engine/kubecontext"
	"github.com/airlock-dev/airlock/userconfig"
)

// The Kubernetes backend's endpoint (package kubecontext). A build with the tag
// nokube has none: client-go's kubeconfig reader is left out.

// kubeEndpoint is the endpoint of the chosen Kubernetes backend, read from the
// kubeconfig without reaching the cluster. Through a daemon on another machine
// the kubeconfig is that daemon's: only the context and namespace are sent.
func (a *app) kubeEndpoint(b *backendChoice) (engine.Endpoint, error) {
	k := b.Kubernetes
	pod, err := podSettings(k)
	if err != nil {
		return engine.Endpoint{}, err
	}
	cfg := kubecontext.Config{Context: k.Context, Namespace: k.Namespace, Image: k.Image,
		CreateNamespace: k.CreateNamespace, AllowPrivileged: k.AllowPrivileged, Pod: pod}
	if a.remoteHost() != "" {
		if cfg.Namespace == "" {
			cfg.Namespace = "airlock"
		}
		return cfg.Endpoint(), nil
	}
	kubeconfig, _ := a.getenv("KUBECONFIG")
	cfg.Kubeconfig = firstPath(kubeconfig)
	cfg, err = kubecontext.Resolve(cfg)
	if err != nil {
		return engine.Endpoint{}, withCode(ExitAirlock, err)
	}
	return cfg.Endpoint(), nil
}

// podSettings is what [kubernetes] sets on every Pod, as the backend takes it.
func podSettings(k userconfig.Kubernetes) (kubecontext.PodSettings, error) {
	p := kubecontext.PodSettings{NodeSelector: k.NodeSelector, RuntimeClassName: k.RuntimeClassName, ServiceAccount: k.ServiceAccount}
	for _, t := range k.Tolerations {
		p.Tolerations = append(p.Tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator),
			Value: t.Value, Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.Seconds})
	}
	list := func(key string, m map[string]string) (corev1.ResourceList, error) {
		if len(m) == 0 {
			return nil, nil
		}
		out := corev1.ResourceList{}
		for name, v := range m {
			q, err := resource.ParseQuantity(strings.TrimSpace(v))
			if err != nil {
				return nil, configError(fmt.Errorf("config.toml: %s: %s: invalid quantity %q: %v", key, name, v, err))
			}
			out[corev1.ResourceName(name)] = q
		}
		return out, nil
	}
	var err error
	if p.Resources.Requests, err = list("kubernetes.resources.requests", k.Resources.Requests); err != nil {
		return p, err
	}
	if p.Resources.Limits, err = list("kubernetes.resources.limits", k.Resources.Limits); err != nil {
		return p, err
	}
	return p, nil
}
