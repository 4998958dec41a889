package engine

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestKeyDocker: a Docker Engine's Key is what it was before endpoints could
// name a cluster (the keys below are those earlier versions computed): records
// and labels made with them are found again.
func TestKeyDocker(t *testing.T) {
	for _, tc := range []struct {
		ep   Endpoint
		want string
	}{
		{Endpoint{Host: "unix:///var/run/docker.sock"}, "15dafd15baa3258a"},
		{Endpoint{Context: "desktop-linux", Host: "unix:///Users/me/.docker/run/docker.sock"}, "4bb0f042ebe0075f"},
		{Endpoint{Host: "tcp://build.example:2376", TLSCA: "/c/ca.pem", TLSCert: "/c/cert.pem", TLSKey: "/c/key.pem", TLSVerify: true}, "6ad761074ba73236"},
		{Endpoint{Host: "tcp://127.0.0.1:2375", SkipTLSVerify: true, TLSCA: "/c/ca.pem"}, "82b027dfaa96323c"},
		{Endpoint{Host: "ssh://builder@build.example"}, "32347f2f26252fd8"},
		{Endpoint{Host: "npipe:////./pipe/docker_engine"}, "ca750b8ee549f620"},
		{Endpoint{}, "c82bfd8cf8089cb8"},
	} {
		if got := tc.ep.Key(); got != tc.want {
			t.Errorf("%+v: Key() = %s, want %s", tc.ep, got, tc.want)
		}
		b, err := json.Marshal(tc.ep)
		if err != nil || strings.Contains(string(b), "kubernetes") {
			t.Errorf("%+v: JSON %s (err %v), want no kubernetes field", tc.ep, b, err)
		}
		if n, err := Normalize(tc.ep); err != nil || !reflect.DeepEqual(n, tc.ep) {
			t.Errorf("Normalize(%+v) = %+v, %v; want it unchanged", tc.ep, n, err)
		}
		if tc.ep.IsKubernetes() {
			t.Errorf("%+v: IsKubernetes", tc.ep)
		}
	}
}

// packedClusters are clusters in the typed form, with the packed form earlier
// versions sent and recorded for each (Host) and its Key, both as they made them.
var packedClusters = []struct {
	name   string
	typed  Kubernetes
	packed string
	key    string
}{
	{"namespace only", Kubernetes{Namespace: "airlock"}, "kubernetes:///airlock", "55aaa68ce35c5ca8"},
	{"resolved context", Kubernetes{Namespace: "airlock", Context: "kind-airlock", Kubeconfig: "/home/me/.kube/config", Image: "localhost/airlock:abc", CreateNamespace: true},
		"kubernetes:///airlock?context=kind-airlock&create_namespace=true&image=localhost%2Fairlock%3Aabc&kubeconfig=%2Fhome%2Fme%2F.kube%2Fconfig", "ade46fadff2a403b"},
	{"privileged", Kubernetes{Namespace: "ci", Context: "prod", Image: "registry.example.com/airlock:1", AllowPrivileged: true},
		"kubernetes:///ci?allow_privileged=true&context=prod&image=registry.example.com%2Fairlock%3A1", "d0d6c9bb4fd86a29"},
	{"every Pod setting", Kubernetes{Namespace: "ci", Context: "prod", Kubeconfig: "/k", Image: "i", Pod: &KubePod{
		NodeSelector: map[string]string{"kubernetes.io/hostname": "node-2", "a": "b&c"},
		Tolerations: []KubeToleration{{Key: "dedicated", Operator: "Equal", Value: "ci", Effect: "NoSchedule"},
			{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", Seconds: ptr(int64(10))}},
		RuntimeClassName: "gvisor", ServiceAccount: "airlock-sandbox",
		Resources: &KubeResources{Requests: map[string]string{"cpu": "250m", "memory": "2Gi"}, Limits: map[string]string{"cpu": "2", "memory": "4Gi", "ephemeral-storage": "1Gi"}},
	}}, "kubernetes:///ci?context=prod&image=i&kubeconfig=%2Fk&pod=%7B%22node_selector%22%3A%7B%22a%22%3A%22b%5Cu0026c%22%2C%22kubernetes.io%2Fhostname%22%3A%22node-2%22%7D%2C%22tolerations%22%3A%5B%7B%22key%22%3A%22dedicated%22%2C%22operator%22%3A%22Equal%22%2C%22value%22%3A%22ci%22%2C%22effect%22%3A%22NoSchedule%22%7D%2C%7B%22key%22%3A%22node.kubernetes.io%2Funreachable%22%2C%22operator%22%3A%22Exists%22%2C%22effect%22%3A%22NoExecute%22%2C%22tolerationSeconds%22%3A10%7D%5D%2C%22runtime_class_name%22%3A%22gvisor%22%2C%22service_account%22%3A%22airlock-sandbox%22%2C%22resources%22%3A%7B%22limits%22%3A%7B%22cpu%22%3A%222%22%2C%22ephemeral-storage%22%3A%221Gi%22%2C%22memory%22%3A%224Gi%22%7D%2C%22requests%22%3A%7B%22cpu%22%3A%22250m%22%2C%22memory%22%3A%222Gi%22%7D%7D%7D",
		"840cd0406aeec7ca"},
	{"a ServiceAccount alone", Kubernetes{Namespace: "n", Pod: &KubePod{ServiceAccount: "sa"}},
		"kubernetes:///n?pod=%7B%22service_account%22%3A%22sa%22%2C%22resources%22%3A%7B%7D%7D", "5d4e991d4a017b4c"},
	{"a limit alone", Kubernetes{Namespace: "n", Pod: &KubePod{Resources: &KubeResources{Limits: map[string]string{"memory": "1536Mi"}}}},
		"kubernetes:///n?pod=%7B%22resources%22%3A%7B%22limits%22%3A%7B%22memory%22%3A%221536Mi%22%7D%7D%7D", "3d91dc1e9d2034f5"},
}

func ptr[T any](v T) *T { return &v }

// TestKubernetesEndpoint: a cluster's endpoint is typed; the packed form of
// earlier versions is read into the same typed value (Normalize); the Key is
// the same in either form, and the one earlier versions computed; String
// still shows the packed form; the typed form survives JSON.
func TestKubernetesEndpoint(t *testing.T) {
	for _, tc := range packedClusters {
		t.Run(tc.name, func(t *testing.T) {
			typed := Endpoint{Kubernetes: &tc.typed}
			old := Endpoint{Host: tc.packed}
			if !typed.IsKubernetes() || typed.IsZero() || typed.Local() {
				t.Errorf("typed: IsKubernetes %v, IsZero %v, Local %v", typed.IsKubernetes(), typed.IsZero(), typed.Local())
			}
			if got := typed.Kubernetes.packed(); got != tc.packed {
				t.Errorf("packed form\n got %s\nwant %s", got, tc.packed)
			}
			if typed.Key() != tc.key || old.Key() != tc.key {
				t.Errorf("Key() typed %s, packed %s; want %s (as earlier versions computed it)", typed.Key(), old.Key(), tc.key)
			}
			if got := typed.String(); got != tc.packed {
				t.Errorf("String() = %s, want %s", got, tc.packed)
			}
			n, err := Normalize(old)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(n, typed) {
				t.Errorf("Normalize(packed) = %+v\nwant %+v", n.Kubernetes, typed.Kubernetes)
			}
			if again, err := Normalize(n); err != nil || !reflect.DeepEqual(again, n) {
				t.Errorf("Normalize(typed) = %+v, %v; want it unchanged", again, err)
			}
			b, err := json.Marshal(typed)
			if err != nil {
				t.Fatal(err)
			}
			var back Endpoint
			if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, typed) || back.Key() != tc.key {
				t.Errorf("JSON round trip of %s: %+v (err %v)", b, back.Kubernetes, err)
			}
			named := typed
			named.Context = "ctx"
			if named.Key() != tc.key {
				t.Errorf("Key() depends on the endpoint's context name")
			}
		})
	}
	keys := map[string]string{}
	for _, tc := range packedClusters {
		if other, ok := keys[tc.key]; ok {
			t.Errorf("%s and %s share a Key", tc.name, other)
		}
		keys[tc.key] = tc.name
	}
}

// TestKubernetesJSON: the typed form's JSON, as the API and the store carry it.
func TestKubernetesJSON(t *testing.T) {
	ep := Endpoint{Kubernetes: &Kubernetes{Namespace: "ci", Context: "prod", AllowPrivileged: true, Pod: &KubePod{
		Tolerations: []KubeToleration{{Key: "k", Operator: "Exists", Seconds: ptr(int64(5))}},
		Resources:   &KubeResources{Limits: map[string]string{"cpu": "2"}}}}}
	b, err := json.Marshal(ep)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"host":"","kubernetes":{"namespace":"ci","context":"prod","allow_privileged":true,"pod":{"tolerations":[{"key":"k","operator":"Exists","toleration_seconds":5}],"resources":{"limits":{"cpu":"2"}}}}}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
}

// TestNormalizeRefuses: an endpoint naming both a host and a cluster, and a
// packed form that cannot be read, are refused.
func TestNormalizeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		ep   Endpoint
		want string
	}{
		{"host and cluster", Endpoint{Host: "unix:///var/run/docker.sock", Kubernetes: &Kubernetes{Namespace: "a"}}, "names both a host and a Kubernetes cluster"},
		{"packed and cluster", Endpoint{Host: "kubernetes:///a", Kubernetes: &Kubernetes{Namespace: "a"}}, "names both"},
		{"bad Pod JSON", Endpoint{Host: "kubernetes:///a?pod=%7B"}, "cannot read the Pod settings of the Kubernetes backend"},
		{"bad URL", Endpoint{Host: "kubernetes:///a?%zz"}, ""},
		{"not a URL", Endpoint{Host: "kubernetes://[::1"}, "cannot read the Kubernetes backend"},
	} {
		_, err := Normalize(tc.ep)
		if tc.want == "" {
			// url.Query drops a malformed pair, as earlier versions read it.
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	// A Pod of no settings is none.
	n, err := Normalize(Endpoint{Host: `kubernetes:///a?pod={"resources":{}}`})
	if err != nil || n.Kubernetes == nil || n.Kubernetes.Pod != nil || n.Kubernetes.Namespace != "a" {
		t.Errorf("an empty Pod: %+v, %v", n.Kubernetes, err)
	}
}
