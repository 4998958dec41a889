package kubecontext_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/engine/kubecontext"
)

// configs are backends' settings with the endpoint earlier versions made of
// each, packed in Host, and its Key, both as they made them.
func configs() []struct {
	name   string
	cfg    kubecontext.Config
	packed string
	key    string
} {
	ten := int64(10)
	return []struct {
		name   string
		cfg    kubecontext.Config
		packed string
		key    string
	}{
		{"namespace only", kubecontext.Config{Namespace: "airlock"}, "kubernetes:///airlock", "55aaa68ce35c5ca8"},
		{"resolved", kubecontext.Config{Namespace: "airlock", Context: "kind-airlock", Kubeconfig: "/home/me/.kube/config", Image: "localhost/airlock:abc", CreateNamespace: true},
			"kubernetes:///airlock?context=kind-airlock&create_namespace=true&image=localhost%2Fairlock%3Aabc&kubeconfig=%2Fhome%2Fme%2F.kube%2Fconfig", "ade46fadff2a403b"},
		{"privileged", kubecontext.Config{Namespace: "ci", Context: "prod", Image: "registry.example.com/airlock:1", AllowPrivileged: true},
			"kubernetes:///ci?allow_privileged=true&context=prod&image=registry.example.com%2Fairlock%3A1", "d0d6c9bb4fd86a29"},
		{"every Pod setting", kubecontext.Config{Namespace: "ci", Context: "prod", Kubeconfig: "/k", Image: "i", Pod: kubecontext.PodSettings{
			NodeSelector: map[string]string{"kubernetes.io/hostname": "node-2", "a": "b&c"},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ci", Effect: corev1.TaintEffectNoSchedule},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &ten}},
			RuntimeClassName: "gvisor", ServiceAccount: "airlock-sandbox",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("2Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
			}}},
			"kubernetes:///ci?context=prod&image=i&kubeconfig=%2Fk&pod=%7B%22node_selector%22%3A%7B%22a%22%3A%22b%5Cu0026c%22%2C%22kubernetes.io%2Fhostname%22%3A%22node-2%22%7D%2C%22tolerations%22%3A%5B%7B%22key%22%3A%22dedicated%22%2C%22operator%22%3A%22Equal%22%2C%22value%22%3A%22ci%22%2C%22effect%22%3A%22NoSchedule%22%7D%2C%7B%22key%22%3A%22node.kubernetes.io%2Funreachable%22%2C%22operator%22%3A%22Exists%22%2C%22effect%22%3A%22NoExecute%22%2C%22tolerationSeconds%22%3A10%7D%5D%2C%22runtime_class_name%22%3A%22gvisor%22%2C%22service_account%22%3A%22airlock-sandbox%22%2C%22resources%22%3A%7B%22limits%22%3A%7B%22cpu%22%3A%222%22%2C%22ephemeral-storage%22%3A%221Gi%22%2C%22memory%22%3A%224Gi%22%7D%2C%22requests%22%3A%7B%22cpu%22%3A%22250m%22%2C%22memory%22%3A%222Gi%22%7D%7D%7D",
			"840cd0406aeec7ca"},
		{"a ServiceAccount alone", kubecontext.Config{Namespace: "n", Pod: kubecontext.PodSettings{ServiceAccount: "sa"}},
			"kubernetes:///n?pod=%7B%22service_account%22%3A%22sa%22%2C%22resources%22%3A%7B%7D%7D", "5d4e991d4a017b4c"},
		{"a limit not in canonical form", kubecontext.Config{Namespace: "n", Pod: kubecontext.PodSettings{Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1.5Gi")}}}},
			"kubernetes:///n?pod=%7B%22resources%22%3A%7B%22limits%22%3A%7B%22memory%22%3A%221536Mi%22%7D%7D%7D", "3d91dc1e9d2034f5"},
	}
}

// sameConfig reports whether a and b name the same backend (quantities compared by value).
func sameConfig(a, b kubecontext.Config) bool {
	qa, qb := a.Pod.Resources, b.Pod.Resources
	a.Pod.Resources, b.Pod.Resources = corev1.ResourceRequirements{}, corev1.ResourceRequirements{}
	return reflect.DeepEqual(a, b) && sameList(qa.Requests, qb.Requests) && sameList(qa.Limits, qb.Limits)
}

func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if r, ok := b[name]; !ok || q.Cmp(r) != 0 {
			return false
		}
	}
	return true
}

// TestEndpoint: a backend's endpoint is typed (no Host to parse), read back
// by ConfigOf; the packed form earlier versions made of the same settings is
// read (normalised) to the same typed endpoint and Config; and the Key is
// the one earlier versions computed, in either form.
func TestEndpoint(t *testing.T) {
	for _, tc := range configs() {
		t.Run(tc.name, func(t *testing.T) {
			ep := tc.cfg.Endpoint()
			if !ep.IsKubernetes() || ep.Host != "" || ep.Kubernetes.Namespace != tc.cfg.Namespace {
				t.Fatalf("endpoint %+v, want a typed cluster", ep)
			}
			if ep.Key() != tc.key {
				t.Errorf("Key() = %s, want %s (as earlier versions computed it)", ep.Key(), tc.key)
			}
			if got := ep.String(); got != tc.packed {
				t.Errorf("String() = %s, want %s", got, tc.packed)
			}
			back, err := kubecontext.ConfigOf(ep)
			if err != nil {
				t.Fatal(err)
			}
			if !sameConfig(back, tc.cfg) {
				t.Errorf("ConfigOf(Endpoint()) = %+v, want %+v", back, tc.cfg)
			}
			old, err := engine.Normalize(engine.Endpoint{Host: tc.packed})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(old, ep) || old.Key() != tc.key {
				t.Errorf("the packed form, normalised: %+v (Key %s), want %+v", old.Kubernetes, old.Key(), ep.Kubernetes)
			}
			if fromOld, err := kubecontext.ConfigOf(old); err != nil || !sameConfig(fromOld, tc.cfg) {
				t.Errorf("ConfigOf(the packed form, normalised) = %+v, %v; want %+v", fromOld, err, tc.cfg)
			}
		})
	}
}

// TestConfigOfRefuses: ConfigOf of a Docker Engine's endpoint, of a packed
// form not normalised, and of a quantity Kubernetes cannot read, fails.
func TestConfigOfRefuses(t *testing.T) {
	for _, tc := range []struct {
		ep   engine.Endpoint
		want string
	}{
		{engine.Endpoint{Host: "unix:///var/run/docker.sock"}, "names a Docker Engine"},
		{engine.Endpoint{Host: "kubernetes:///airlock"}, "names a Docker Engine"},
		{engine.Endpoint{Kubernetes: &engine.Kubernetes{Namespace: "a", Pod: &engine.KubePod{Resources: &engine.KubeResources{Limits: map[string]string{"cpu": "lots"}}}}},
			`limits: cpu: invalid quantity "lots"`},
	} {
		if _, err := kubecontext.ConfigOf(tc.ep); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "cannot ") {
			t.Errorf("ConfigOf(%+v): %v, want %q", tc.ep, err, tc.want)
		}
	}
}
