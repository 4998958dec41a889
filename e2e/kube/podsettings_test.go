//go:build kube

package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/airlock-dev/airlock/test/clitest"
)

// TestPodSettingsOnCluster: what config.toml's [kubernetes] sets on every Pod
// reaches the cluster: the sandbox runs on the node its node_selector names,
// with its RuntimeClass (handler runc, as a gVisor or Kata one would be named),
// ServiceAccount (whose API token is not mounted), tolerations and default
// resources; a RuntimeClass the cluster lacks fails the run with the cluster's
// word for it, and leaves nothing.
func TestPodSettingsOnCluster(t *testing.T) {
	e, cs := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	ctx := context.Background()
	const class, account = "airlock-e2e-runc", "airlock-e2e-sandbox"
	ensureNamespace(t, cs)
	if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Handler: "runc"}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("cannot list the cluster's nodes: %v", err)
	}
	node := nodes.Items[len(nodes.Items)-1]
	host := node.Labels["kubernetes.io/hostname"]
	cfgPath := filepath.Join(e.Config, "airlock", "config.toml")
	base, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	settings := string(base) + `node_selector = { "kubernetes.io/hostname" = "` + host + `" }
runtime_class_name = "` + class + `"
service_account = "` + account + `"
tolerations = [{ key = "airlock-e2e", operator = "Exists", effect = "NoSchedule" }]

[kubernetes.resources]
requests = { cpu = "10m", memory = "16Mi" }
limits = { memory = "256Mi" }
`
	if err := os.WriteFile(cfgPath, []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	e.MustRun("up", "-d")
	pods := projectPods(t, cs, e.Project)
	if len(pods) != 1 {
		t.Fatalf("want one Pod for the up sandbox, got %d", len(pods))
	}
	p := pods[0]
	if p.Spec.NodeName != node.Name || p.Spec.NodeSelector["kubernetes.io/hostname"] != host {
		t.Errorf("the Pod is on node %q with nodeSelector %v, want node %s", p.Spec.NodeName, p.Spec.NodeSelector, node.Name)
	}
	if p.Spec.RuntimeClassName == nil || *p.Spec.RuntimeClassName != class {
		t.Errorf("runtimeClassName %v, want %s", p.Spec.RuntimeClassName, class)
	}
	if p.Spec.ServiceAccountName != account {
		t.Errorf("serviceAccountName %q, want %s", p.Spec.ServiceAccountName, account)
	}
	found := false
	for _, tol := range p.Spec.Tolerations {
		found = found || (tol.Key == "airlock-e2e" && tol.Operator == corev1.TolerationOpExists && tol.Effect == corev1.TaintEffectNoSchedule)
	}
	if !found {
		t.Errorf("the toleration is not on the Pod: %+v", p.Spec.Tolerations)
	}
	res := p.Spec.Containers[0].Resources
	if res.Requests.Cpu().Cmp(resource.MustParse("10m")) != 0 || res.Requests.Memory().Cmp(resource.MustParse("16Mi")) != 0 || res.Limits.Memory().Cmp(resource.MustParse("256Mi")) != 0 {
		t.Errorf("resources %+v, want requests cpu 10m memory 16Mi, limit memory 256Mi", res)
	}
	r := e.Run("exec", "--", "sh", "-c", "ls /var/run/secrets/kubernetes.io/serviceaccount/token 2>/dev/null || echo no-token")
	if r.Code != 0 || !strings.Contains(r.Stdout, "no-token") {
		t.Errorf("the ServiceAccount's API token is in the sandbox: %s", r)
	}
	e.MustRun("down")
	waitNoPods(t, cs, e.Project, 30*time.Second)

	// A RuntimeClass the cluster does not have.
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(settings, class, "airlock-e2e-no-such-class", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = e.Run("run", "--", "true")
	if r.Code != 125 || !strings.Contains(r.Stderr, "airlock-e2e-no-such-class") {
		t.Errorf("a run with a missing RuntimeClass: want exit 125 naming it, got %s", r)
	}
	waitNoPods(t, cs, e.Project, 30*time.Second)
}

// TestReadyTimeoutBoundsPodStart: a Pod whose required service never passes
// its healthcheck fails the run once sandbox.ready_timeout has passed, with
// exit 125 and what keeps it, and leaves nothing. (One no node can take fails
// at once with the scheduler's reason.)
func TestReadyTimeoutBoundsPodStart(t *testing.T) {
	e, cs := newEnv(t, `[sandbox]
image = "{{image}}"
ready_timeout = "4s"

[services.db]
image = "{{image}}"
command = ["sleep", "300"]
required = true
healthcheck = { cmd = ["false"], interval = "1s", timeout = "1s", retries = 1000 }
`)
	start := time.Now()
	r := e.Run("run", "--", "true")
	took := time.Since(start)
	if r.Code != 125 || !strings.Contains(r.Stderr, "sandbox.ready_timeout (4s)") || !strings.Contains(r.Stderr, "service db runs but has not passed its healthcheck") {
		t.Errorf("want exit 125 naming ready_timeout and the service, got %s", r)
	}
	if took > 60*time.Second {
		t.Errorf("the run took %v to fail, with ready_timeout 4s", took)
	}
	waitNoPods(t, cs, e.Project, 30*time.Second)

	appendConfig(t, e, "node_selector = { \"airlock-e2e/no-such-node\" = \"yes\" }\n")
	e.WriteManifest("[sandbox]\nimage = \"{{image}}\"\n")
	r = e.Run("run", "--", "true")
	if r.Code != 125 || !strings.Contains(r.Stderr, "cannot be scheduled") || !strings.Contains(r.Stderr, "node affinity/selector") {
		t.Errorf("a Pod no node matches: want exit 125 with the scheduler's reason, got %s", r)
	}
	waitNoPods(t, cs, e.Project, 30*time.Second)
	if ps := e.MustRun("ps", "-a").Stdout; strings.Count(ps, "\n") > 2 {
		t.Errorf("the failed runs left sandboxes:\n%s", ps)
	}
}

// ensureNamespace makes the tests' namespace, for a test that puts objects in
// it before airlock runs (which would make it).
func ensureNamespace(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

// appendConfig adds lines to the end of the test's config.toml (its
// [kubernetes] table, unless they open another).
func appendConfig(t *testing.T, e *clitest.Env, lines string) {
	t.Helper()
	path := filepath.Join(e.Config, "airlock", "config.toml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, lines...), 0o644); err != nil {
		t.Fatal(err)
	}
}
