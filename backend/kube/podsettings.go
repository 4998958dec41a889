package kube

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/airlock-dev/airlock/engine/kubecontext"
)

// PodSettings is what config.toml's [kubernetes] table sets on every Pod of
// a backend (package kubecontext, which carries it in the endpoint).
type PodSettings = kubecontext.PodSettings

// nodeLostSeconds is how long a sandbox's Pod stays bound to a node that is
// not ready or unreachable (docs/kubernetes.md, "A node lost").
const nodeLostSeconds = 20

// applySettings sets s on pod, whose first container is the sandbox's.
func applySettings(s PodSettings, pod *corev1.Pod) {
	if len(s.NodeSelector) > 0 {
		pod.Spec.NodeSelector = maps.Clone(s.NodeSelector)
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, s.Tolerations...)
	// A node that stops answering takes its Pods with it after
	// nodeLostSeconds, not the cluster's default five minutes (the
	// DefaultTolerationSeconds admission adds 300 s ones only where none is
	// given): a sandbox on a lost node fails in under a minute. A toleration
	// of the same taint in [kubernetes] replaces ours.
	for _, taint := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		if !slices.ContainsFunc(s.Tolerations, func(t corev1.Toleration) bool { return t.Key == taint }) {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: taint, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(nodeLostSeconds))})
		}
	}
	if s.RuntimeClassName != "" {
		pod.Spec.RuntimeClassName = ptr(s.RuntimeClassName)
	}
	if s.ServiceAccount != "" {
		pod.Spec.ServiceAccountName = s.ServiceAccount
	}
	c := &pod.Spec.Containers[0]
	for name, q := range s.Resources.Limits {
		if _, set := c.Resources.Limits[name]; set {
			continue // the manifest's sandbox.cpus or sandbox.memory
		}
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		c.Resources.Limits[name] = q
	}
	for name, q := range s.Resources.Requests {
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		// A request above the limit would be refused: the limit, which the
		// manifest may have lowered, caps it.
		if l, ok := c.Resources.Limits[name]; ok && q.Cmp(l) > 0 {
			q = l
		}
		c.Resources.Requests[name] = q
	}
}
