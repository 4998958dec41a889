package userconfig

import (
	"reflect"
	"strings"
	"testing"
)

// TestKubernetesPodSettings: the [kubernetes] keys that shape every Pod
// (node_selector, tolerations, runtime_class_name, service_account,
// [kubernetes.resources]) are read as written, and each mistake is an error
// naming config.toml's line and the key, as the API server would refuse it.
func TestKubernetesPodSettings(t *testing.T) {
	t.Parallel()
	full := `[kubernetes]
node_selector = { "kubernetes.io/hostname" = "node-1", disk = "ssd" }
runtime_class_name = "gvisor"
service_account = "airlock-sandbox"
tolerations = [
  { key = "dedicated", value = "ci", effect = "NoSchedule" },
  { key = "node.kubernetes.io/unreachable", operator = "Exists", effect = "NoExecute", toleration_seconds = 10 },
]

[kubernetes.resources]
requests = { cpu = "250m", memory = "64Mi" }
limits = { memory = "1Gi", ephemeral-storage = "2G" }
`
	cfg, err := Parse("config.toml", []byte(full), "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	ten := int64(10)
	want := Kubernetes{
		Namespace: DefaultNamespace, CreateNamespace: true,
		NodeSelector:     map[string]string{"kubernetes.io/hostname": "node-1", "disk": "ssd"},
		RuntimeClassName: "gvisor",
		ServiceAccount:   "airlock-sandbox",
		Tolerations: []Toleration{
			{Key: "dedicated", Value: "ci", Effect: "NoSchedule"},
			{Key: "node.kubernetes.io/unreachable", Operator: "Exists", Effect: "NoExecute", Seconds: &ten},
		},
		Resources: Resources{Requests: map[string]string{"cpu": "250m", "memory": "64Mi"}, Limits: map[string]string{"memory": "1Gi", "ephemeral-storage": "2G"}},
	}
	if !reflect.DeepEqual(cfg.Kubernetes, want) {
		t.Errorf("got  %+v\nwant %+v", cfg.Kubernetes, want)
	}

	cases := []struct{ name, src, want string }{
		{"selector key", "[kubernetes]\nnode_selector = { \"a b\" = \"x\" }\n", `config.toml:2: kubernetes.node_selector: label "a b": invalid name "a b"`},
		{"selector prefix", "[kubernetes]\nnode_selector = { \"Example.com/disk\" = \"x\" }\n", `kubernetes.node_selector: label "Example.com/disk": invalid prefix "Example.com"`},
		{"selector value", "[kubernetes]\nnode_selector = { disk = \"fast ssd\" }\n", `config.toml:2: kubernetes.node_selector: label "disk": invalid value "fast ssd"`},
		{"selector not strings", "[kubernetes]\nnode_selector = { disk = 1 }\n", `config.toml:2: kubernetes.node_selector`},
		{"toleration operator", "[kubernetes]\ntolerations = [{ key = \"a\", operator = \"In\" }]\n", `config.toml:2: kubernetes.tolerations: kubernetes.tolerations[0]: unknown operator "In" (want Equal or Exists)`},
		{"toleration effect", "[kubernetes]\ntolerations = [{ key = \"a\", effect = \"NoRun\" }]\n", `kubernetes.tolerations[0]: unknown effect "NoRun"`},
		{"toleration equal without key", "[kubernetes]\ntolerations = [{ value = \"x\" }]\n", `kubernetes.tolerations[0]: operator Equal needs a key`},
		{"toleration exists with value", "[kubernetes]\ntolerations = [{ key = \"a\", operator = \"Exists\", value = \"x\" }]\n", `operator Exists takes no value`},
		{"toleration seconds without NoExecute", "[kubernetes]\ntolerations = [{ key = \"a\", effect = \"NoSchedule\", toleration_seconds = 5 }]\n", `toleration_seconds goes with effect = "NoExecute"`},
		{"toleration seconds negative", "[kubernetes]\ntolerations = [{ key = \"a\", operator = \"Exists\", effect = \"NoExecute\", toleration_seconds = -1 }]\n", `toleration_seconds must not be negative`},
		{"toleration unknown key", "[kubernetes]\ntolerations = [{ key = \"a\", seconds = 5 }]\n", `kubernetes.tolerations`},
		{"tolerations as tables", "[[kubernetes.tolerations]]\nkey = \"a\"\noperator = \"Maybe\"\n", `config.toml:1: kubernetes.tolerations: kubernetes.tolerations[0]: unknown operator "Maybe"`},
		{"runtime class", "[kubernetes]\nruntime_class_name = \"gVisor\"\n", `config.toml:2: kubernetes.runtime_class_name: invalid RuntimeClass name "gVisor"`},
		{"service account", "[kubernetes]\nservice_account = \"ci_bot\"\n", `config.toml:2: kubernetes.service_account: invalid ServiceAccount name "ci_bot"`},
		{"resource name", "[kubernetes.resources]\nrequests = { gpu = \"1\" }\n", `config.toml:2: kubernetes.resources.requests: unknown resource "gpu" (want cpu, memory, ephemeral-storage)`},
		{"resource quantity", "[kubernetes.resources]\nlimits = { memory = \"1 GB\" }\n", `config.toml:2: kubernetes.resources.limits: memory: invalid quantity "1 GB"`},
		{"request above limit", "[kubernetes.resources]\nrequests = { memory = \"2Gi\", cpu = \"500m\" }\nlimits = { memory = \"1500Mi\", cpu = \"1\" }\n", `config.toml:2: kubernetes.resources.requests: memory: the request 2Gi is above its limit 1500Mi`},
		{"request above limit, other units", "[kubernetes.resources]\nrequests = { cpu = \"1.5\" }\nlimits = { cpu = \"1200m\" }\n", `kubernetes.resources.requests: cpu: the request 1.5 is above its limit 1200m`},
		{"resources unknown key", "[kubernetes.resources]\nrequest = { cpu = \"1\" }\n", `config.toml:2: kubernetes.resources.request: unknown key`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("config.toml", []byte(c.src), "/home/u")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if !IsConfigError(err) {
				t.Fatalf("%v is not a config error", err)
			}
		})
	}
}
