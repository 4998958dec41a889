//go:build !nokube

package cli

import (
	"context"

	"github.com/airlock-dev/airlock/control"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/kube"
)

// The Kubernetes backend (package kube). The supervisor injected into sandboxes is
// built without it (build tag nokube): it never talks to a cluster, and client-go
// would add to every sandbox's start.

// kubeEndpoint is the endpoint of the chosen Kubernetes backend, read from the
// kubeconfig without reaching the cluster. Through a daemon on another machine
// the kubeconfig is that daemon's: only the context and namespace are sent.
func (a *app) kubeEndpoint(b *backendChoice) (engine.Endpoint, error) {
	k := b.Kubernetes
	cfg := kube.Config{Context: k.Context, Namespace: k.Namespace, Image: k.Image,
		CreateNamespace: k.CreateNamespace, AllowPrivileged: k.AllowPrivileged}
	if a.remoteHost() != "" {
		if cfg.Namespace == "" {
			cfg.Namespace = "airlock"
		}
		return cfg.Endpoint(), nil
	}
	kubeconfig, _ := a.getenv("KUBECONFIG")
	cfg.Kubeconfig = firstPath(kubeconfig)
	cfg, err := kube.Resolve(cfg)
	if err != nil {
		return engine.Endpoint{}, sandboxError(err)
	}
	return cfg.Endpoint(), nil
}

// openBackend opens the Kubernetes backend a sandbox was created on.
func openBackend(ctx context.Context, ep engine.Endpoint, owner string) (control.Backend, error) {
	cfg, err := kube.ConfigOf(ep)
	if err != nil {
		return nil, err
	}
	cfg.Owner = owner
	return kube.Open(ctx, cfg)
}
