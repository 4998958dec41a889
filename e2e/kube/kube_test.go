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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/airlock-dev/airlock/internal/clitest"
	"github.com/airlock-dev/airlock/kube"
	"github.com/airlock-dev/airlock/sandbox"
)

// namespace is where the tests' sandboxes run.
const namespace = "airlock-e2e"

// newEnv is a clitest environment whose config.toml chooses the test cluster, with
// the busybox image there as {{image}}. When the test ends, no Pod of its project
// may be left in the namespace (any is removed, and the test fails).
func newEnv(t *testing.T, manifest string) (*clitest.Env, kubernetes.Interface) {
	t.Helper()
	e := clitest.New(t, "")
	e.Image = busybox
	if manifest != "" {
		e.WriteManifest(manifest)
	}
	cfg := "[runtime]\nbackend = \"kubernetes\"\n\n[kubernetes]\nnamespace = \"" + namespace + "\"\nimage = \"" + airlockRef + "\"\n"
	if err := os.MkdirAll(filepath.Join(e.Config, "airlock"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Config, "airlock", "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	e.Extra = append(e.Extra, "KUBECONFIG="+kubeconfig)
	cs := clientset(t)
	t.Cleanup(func() {
		left := projectPods(t, cs, e.Project)
		for _, p := range left {
			zero := int64(0)
			_ = cs.CoreV1().Pods(namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
		if len(left) > 0 && !t.Failed() {
			t.Errorf("%d Pod(s) of the test's project left in namespace %s: %s", len(left), namespace, podNames(left))
		}
	})
	return e, cs
}

func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// projectPods are the Pods of sandboxes of a project dir (the project is an
// annotation: a path cannot be a label value).
func projectPods(t *testing.T, cs kubernetes.Interface, project string) []corev1.Pod {
	t.Helper()
	list, err := cs.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: sandbox.LabelRole + "=primary"})
	if err != nil {
		t.Fatalf("cannot list the namespace's Pods: %v", err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if v, _ := kube.MetaValue(&p.ObjectMeta, sandbox.LabelProject); v == project {
			out = append(out, p)
		}
	}
	return out
}

func podNames(ps []corev1.Pod) string {
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

// waitNoPods waits until no Pod of the project is left (deleted ones included).
func waitNoPods(t *testing.T, cs kubernetes.Interface, project string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := projectPods(t, cs, project)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Pods still there after %v: %s", within, podNames(left))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRunOnCluster: a run with a ready-gated daemon, a required service, a copied
// project and a vault-free substituted value gets its output and exit code, and
// leaves no Pod.
func TestRunOnCluster(t *testing.T) {
	e, cs := newEnv(t, `[sandbox]
image = "{{image}}"

[env]
GREETING = "${AIRLOCK_E2E_GREETING}"

[daemons.web]
command = ["sh", "-c", "mkdir -p /tmp/www && echo daemon-up > /tmp/www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /tmp/www"]
ready = { http = "http://127.0.0.1:8080/", timeout = "30s" }

[services.db]
image = "{{image}}"
command = ["sh", "-c", "mkdir -p /www && echo service-up > /www/index.html && exec httpd -f -p 9090 -h /www"]
required = true
healthcheck = { cmd = ["wget", "-q", "-O", "/dev/null", "http://127.0.0.1:9090/"], interval = "500ms", timeout = "2s", retries = 60 }
`)
	e.WriteFile("data.txt", "from-the-project\n")
	r := e.RunEnv([]string{"AIRLOCK_E2E_GREETING=hello-cluster"}, "run", "--", "sh", "-c",
		`cat data.txt; echo "$GREETING"; wget -q -O- http://127.0.0.1:8080/; wget -q -O- http://db:9090/; echo to-stderr >&2; exit 3`)
	if r.Code != 3 {
		t.Fatalf("run exited %d, want 3: %s", r.Code, r)
	}
	for _, want := range []string{"from-the-project", "hello-cluster", "daemon-up", "service-up"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("stdout lacks %q: %s", want, r)
		}
	}
	if !strings.Contains(r.Stderr, "to-stderr") || strings.Contains(r.Stdout, "to-stderr") {
		t.Errorf("stderr not kept apart: %s", r)
	}
	waitNoPods(t, cs, e.Project, 10*time.Second)
}
