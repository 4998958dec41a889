package kube_test

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/airlock-dev/airlock/backend/kube"
)

// TestPodSettings: what [kubernetes] sets on every Pod (node selector,
// tolerations, RuntimeClass, ServiceAccount, default resources) is on the
// Pod, the API token is still not mounted, and sandbox.cpus and
// sandbox.memory take the place of the limits they name, a request above
// such a limit lowered to it.
func TestPodSettings(t *testing.T) {
	t.Parallel()
	ten := int64(10)
	settings := kube.PodSettings{
		NodeSelector:     map[string]string{"kubernetes.io/hostname": "node-2"},
		Tolerations:      []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ci", Effect: corev1.TaintEffectNoSchedule}, {Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &ten}},
		RuntimeClassName: "gvisor",
		ServiceAccount:   "airlock-sandbox",
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("2Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
		},
	}
	pod := build(t, "[sandbox]\nimage = \"busybox\"\nmemory = \"1g\"\n", func(in *kube.PodInput) { in.Settings = settings })
	if !reflect.DeepEqual(pod.Spec.NodeSelector, settings.NodeSelector) {
		t.Errorf("nodeSelector %v, want %v", pod.Spec.NodeSelector, settings.NodeSelector)
	}
	twenty := int64(20)
	notReady := corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &twenty}
	unreachable := corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &twenty}
	// The configured unreachable toleration replaces airlock's; not-ready keeps it.
	if want := append(slices.Clone(settings.Tolerations), notReady); !reflect.DeepEqual(pod.Spec.Tolerations, want) {
		t.Errorf("tolerations %+v, want %+v", pod.Spec.Tolerations, want)
	}
	if pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != "gvisor" {
		t.Errorf("runtimeClassName %v, want gvisor", pod.Spec.RuntimeClassName)
	}
	if pod.Spec.ServiceAccountName != "airlock-sandbox" {
		t.Errorf("serviceAccountName %q, want airlock-sandbox", pod.Spec.ServiceAccountName)
	}
	if a := pod.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("automountServiceAccountToken %v, want false: the sandbox's code is not trusted with an API token", a)
	}
	res := pod.Spec.Containers[0].Resources
	for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "1073741824", corev1.ResourceEphemeralStorage: "1Gi"} {
		if q, ok := res.Limits[name]; !ok || q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("limit of %s: %v, want %s", name, res.Limits[name], want)
		}
	}
	for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: "250m", corev1.ResourceMemory: "1073741824"} {
		if q, ok := res.Requests[name]; !ok || q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("request of %s: %v, want %s (a request above the manifest's limit is lowered to it)", name, res.Requests[name], want)
		}
	}

	// Nothing set: the Pod is as before, but for a node lost taking its Pods
	// in 20 s rather than the cluster's default 300.
	plain := build(t, "[sandbox]\nimage = \"busybox\"\n", nil)
	if want := []corev1.Toleration{notReady, unreachable}; !reflect.DeepEqual(plain.Spec.Tolerations, want) {
		t.Errorf("tolerations without settings %+v, want %+v", plain.Spec.Tolerations, want)
	}
	if plain.Spec.NodeSelector != nil || plain.Spec.RuntimeClassName != nil || plain.Spec.ServiceAccountName != "" || plain.Spec.Containers[0].Resources.Requests != nil {
		t.Errorf("a Pod without settings: %+v", plain.Spec)
	}

	// The settings travel in the backend's endpoint.
	cfg := kube.Config{Namespace: "ci", Context: "prod", Pod: settings}
	back, err := kube.ConfigOf(cfg.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Pod.NodeSelector, settings.NodeSelector) || !reflect.DeepEqual(back.Pod.Tolerations, settings.Tolerations) ||
		back.Pod.RuntimeClassName != "gvisor" || back.Pod.ServiceAccount != "airlock-sandbox" || back.Pod.Resources.Limits.Memory().Cmp(resource.MustParse("4Gi")) != 0 {
		t.Errorf("through the endpoint: %+v, want %+v", back.Pod, settings)
	}
	if (kube.Config{Namespace: "ci"}).Endpoint().Key() == cfg.Endpoint().Key() {
		t.Errorf("the endpoint does not tell Pod settings apart")
	}
}
