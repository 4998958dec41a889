//go:build !nokube

package cli

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/engine"
)

const testKubeconfig = `apiVersion: v1
kind: Config
current-context: kind-airlock
clusters:
- name: kind
  cluster: {server: "https://127.0.0.1:6443"}
contexts:
- name: kind-airlock
  context: {cluster: kind, user: me}
users:
- name: me
  user: {token: t}
`

// TestKubeTarget: the CLI sends the cluster typed (no Host), its context and
// kubeconfig resolved as kubectl would, with [kubernetes]'s Pod settings
// (quantities canonical); through a daemon on another machine only the
// context and namespace; and the typed endpoint's Key is that of the packed
// form an earlier CLI sent for the same cluster.
func TestKubeTarget(t *testing.T) {
	t.Parallel()
	config := "[runtime]\nbackend = \"kubernetes\"\n[kubernetes]\nnamespace = \"ci\"\nimage = \"registry.example.com/airlock:1\"\n" +
		"node_selector = {\"kubernetes.io/arch\" = \"amd64\"}\nservice_account = \"sa\"\n" +
		"tolerations = [{key = \"dedicated\", operator = \"Equal\", value = \"ci\", effect = \"NoSchedule\"}]\n" +
		"[kubernetes.resources]\nlimits = {memory = \"1.5Gi\"}\n"
	vars := userHome(t, config, nil)
	kubeconfig := filepath.Join(vars["HOME"], "kubeconfig")
	writeFile(t, kubeconfig, testKubeconfig)
	vars["KUBECONFIG"] = kubeconfig
	a := &app{getenv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	tgt, err := a.target()
	if err != nil {
		t.Fatal(err)
	}
	want := &client.Kubernetes{Namespace: "ci", Context: "kind-airlock", Kubeconfig: kubeconfig, Image: "registry.example.com/airlock:1", CreateNamespace: true,
		Pod: &client.KubePod{NodeSelector: map[string]string{"kubernetes.io/arch": "amd64"}, ServiceAccount: "sa",
			Tolerations: []client.KubeToleration{{Key: "dedicated", Operator: "Equal", Value: "ci", Effect: "NoSchedule"}},
			Resources:   &client.KubeResources{Limits: map[string]string{"memory": "1536Mi"}}}}
	if !tgt.kube || tgt.engine == nil || tgt.engine.Host != "" || !reflect.DeepEqual(tgt.engine.Kubernetes, want) {
		t.Fatalf("target %+v, engine %+v; want the typed cluster %+v", tgt, tgt.engine, want)
	}
	ep := endpointOf(tgt.engine)
	if !ep.IsKubernetes() || !reflect.DeepEqual(wireEngine(ep), tgt.engine) {
		t.Errorf("endpointOf and wireEngine: %+v", ep)
	}
	packed := engineHost(tgt.engine)
	if old := (engine.Endpoint{Host: packed}); old.Key() != ep.Key() {
		t.Errorf("Key %s, the packed form %s has %s", ep.Key(), packed, old.Key())
	}
	// An earlier daemon's answer, packed in Host, names the same cluster.
	if got := endpointOf(&client.Engine{Host: packed}); !reflect.DeepEqual(got, ep) || engineName(&client.Engine{Host: packed}) != engineName(tgt.engine) {
		t.Errorf("the packed form read back: %+v, want %+v", got.Kubernetes, ep.Kubernetes)
	}

	vars["AIRLOCK_HOST"] = "tcp://build.example:7777"
	if tgt, err = a.target(); err != nil {
		t.Fatal(err)
	}
	if k := tgt.engine.Kubernetes; tgt.engine.Host != "" || k == nil || k.Namespace != "ci" || k.Context != "" || k.Kubeconfig != "" || k.Pod == nil {
		t.Errorf("through a daemon on another machine: %+v", k)
	}
}

// TestEngineNameKube: ps names a cluster by its packed form, as before.
func TestEngineNameKube(t *testing.T) {
	t.Parallel()
	e := &client.Engine{Kubernetes: &client.Kubernetes{Namespace: "airlock", Context: "kind-airlock"}}
	if got, want := engineName(e), "kubernetes:///airlock?context=kind-airlock"; got != want {
		t.Errorf("engineName = %q, want %q", got, want)
	}
	if got := engineName(&client.Engine{Host: "tcp://build:2376"}); got != "tcp://build:2376" {
		t.Errorf("engineName of a Docker Engine = %q", got)
	}
}
