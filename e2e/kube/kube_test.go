//go:build kube

package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/kube"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
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
	list, err := cs.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: backend.LabelRole + "=primary"})
	if err != nil {
		t.Fatalf("cannot list the namespace's Pods: %v", err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if v, _ := kube.MetaValue(&p.ObjectMeta, backend.LabelProject); v == project {
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

// TestSealedEndOnCluster: a run whose main command ends with a daemon that
// stops at once returns its code from the sealed end marker, once `supervise
// alone` in the Pod found nothing else running (not the kubelet's report of
// the container's end, a second or more later); a marker forged by the main
// command, which goes on running, is not believed: the real code comes back.
func TestSealedEndOnCluster(t *testing.T) {
	e, cs := newEnv(t, `[sandbox]
image = "{{image}}"

[daemons.quick]
command = ["sleep", "1000"]
`)
	r := e.Run("run", "--id", "sealed-kube-1", "--", "sh", "-c", "echo out; exit 5")
	if r.Code != 5 || r.Stdout != "out\n" {
		t.Fatalf("run: want exit 5 and stdout %q, got %s", "out\n", r)
	}
	if !strings.Contains(r.Stderr, "daemon quick: shut down") {
		t.Errorf("run: no shutdown line for the daemon: %s", r)
	}
	// Its history is a run's that ended well, whichever way its end was
	// seen: ready, the main command's exit, stopped; never failed.
	var hist string
	testenv.Eventually(t, 30*time.Second, "the run's sandbox to be deleted", func() bool {
		hist = e.MustRun("events", "sealed-kube-1").Stdout
		return strings.Contains(hist, "sandbox.deleted")
	})
	for _, want := range []string{"sandbox.ready", "main.exited", "sandbox.stopped"} {
		if !strings.Contains(hist, want) {
			t.Errorf("the run's history lacks %s:\n%s", want, hist)
		}
	}
	if strings.Contains(hist, "sandbox.failed") {
		log, _ := os.ReadFile(filepath.Join(e.Paths().DaemonDir(), "airlockd.log"))
		t.Errorf("the run's history says it failed:\n%s\ndaemon log:\n%s", hist, log)
	}
	r = e.Run("run", "--", "sh", "-c", clitest.ForgeEndMarker)
	if r.Code != 4 {
		t.Fatalf("a run whose main command forged its sealed end marker (code 0) and exited 4: want 4, got %s", r)
	}
	waitNoPods(t, cs, e.Project, 30*time.Second)
}

// TestUpExecLogsDown: an up sandbox is a Pod that stays until down; exec runs in
// it with the project and its code, logs shows a daemon's output.
func TestUpExecLogsDown(t *testing.T) {
	e, cs := newEnv(t, `[sandbox]
image = "{{image}}"

[daemons.web]
command = ["sh", "-c", "echo web-started; mkdir -p /tmp/www && echo ok > /tmp/www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /tmp/www"]
ready = { tcp = "127.0.0.1:8080" }
`)
	e.WriteFile("data.txt", "project-file\n")
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	if ps := e.MustRun("ps").Stdout; !strings.Contains(ps, id) || !strings.Contains(ps, "ready") || !strings.Contains(ps, "1/1") {
		t.Errorf("ps does not show %s ready with its daemon up:\n%s", id, ps)
	}
	if len(projectPods(t, cs, e.Project)) != 1 {
		t.Fatalf("want one Pod for the up sandbox")
	}
	r := e.Run("exec", "--", "sh", "-c", "cat data.txt; wget -q -O /dev/null http://127.0.0.1:8080/ && echo reached; exit 5")
	if r.Code != 5 || !strings.Contains(r.Stdout, "project-file") || !strings.Contains(r.Stdout, "reached") {
		t.Errorf("exec: want exit 5 with the project file and the daemon reached, got %s", r)
	}
	if lr := e.MustRun("logs", "web"); !strings.Contains(lr.Stdout, "web-started") {
		t.Errorf("logs web lacks the daemon's output: %s", lr)
	}
	e.MustRun("down")
	waitNoPods(t, cs, e.Project, 10*time.Second)
	if ps := e.MustRun("ps", "-a").Stdout; strings.Contains(ps, id) {
		t.Errorf("ps -a still lists %s after down:\n%s", id, ps)
	}
}

// TestKilledCLILeavesNoPod: kill -9 of the CLI during run → its Pod is gone within
// 10 s (the daemon's reaper).
func TestKilledCLILeavesNoPod(t *testing.T) {
	e, cs := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	p := e.Start("run", "--", "sh", "-c", "echo started; sleep 300")
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(p.Stdout.String(), "started") {
		if time.Now().After(deadline) {
			t.Fatalf("the main command did not start: %s %s", p.Stdout.String(), p.Stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(projectPods(t, cs, e.Project)) != 1 {
		t.Fatalf("want the run's Pod")
	}
	p.Signal(t, syscall.SIGKILL)
	p.Wait(10 * time.Second)
	waitNoPods(t, cs, e.Project, 10*time.Second)
}

// TestExamplesOnBothBackends runs every example manifest unchanged on the Docker
// Engine and on the cluster: the same command, the same output, the same code.
func TestExamplesOnBothBackends(t *testing.T) {
	redisImage := "airlock-bench/debian-redis:bookworm-1"
	examples := []struct {
		dir, image string // the example, and the local image its sandbox.image names
		cmd        []string
		want       string
	}{
		{"hello", busybox, []string{"wget", "-qO-", "http://127.0.0.1:8080/"}, "hello"},
		{"services", busybox, []string{"wget", "-qO-", "http://web:8080/"}, "hello from the web service"},
		{"redis-ci", redisImage, []string{"make", "test"}, ""},
	}
	entries, err := os.ReadDir(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, ex := range examples {
		covered[ex.dir] = true
	}
	for _, d := range entries {
		if _, err := os.Stat(filepath.Join("..", "..", "examples", d.Name(), "sandbox.toml")); err == nil && !covered[d.Name()] {
			t.Errorf("examples/%s has a sandbox.toml this test does not run", d.Name())
		}
	}
	if out, err := exec.Command(repoFile("scripts/debian-image.sh"), redisImage, "redis-server", "redis-tools", "make").CombinedOutput(); err != nil {
		t.Fatalf("cannot build %s: %v: %s", redisImage, err, out)
	}
	for _, ex := range examples {
		t.Run(ex.dir, func(t *testing.T) {
			e, cs := newEnv(t, "")
			copyExample(t, ex.dir, e.Project)
			m, err := os.ReadFile(filepath.Join(e.Project, "sandbox.toml"))
			if err != nil {
				t.Fatal(err)
			}
			ref := imageOf(t, string(m))
			tagAndImport(t, ex.image, ref)
			var outs [2]string
			for i, backend := range []string{"docker", "kubernetes"} {
				r := e.Run(append([]string{"--backend", backend, "run", "--"}, ex.cmd...)...)
				if r.Code != 0 || !strings.Contains(r.Stdout, ex.want) {
					t.Errorf("%s on %s: want exit 0 and %q, got %s", strings.Join(ex.cmd, " "), backend, ex.want, r)
				}
				outs[i] = r.Stdout
			}
			if outs[0] != outs[1] {
				t.Errorf("the two backends printed different output:\ndocker: %q\nkubernetes: %q", outs[0], outs[1])
			}
			waitNoPods(t, cs, e.Project, 10*time.Second)
		})
	}
}

// copyExample copies examples/<name> into dst.
func copyExample(t *testing.T, name, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("..", "..", "examples", name))); err != nil {
		t.Fatalf("cannot copy example %s: %v", name, err)
	}
}

// imageOf is the sandbox.image a manifest names.
func imageOf(t *testing.T, manifest string) string {
	t.Helper()
	for _, line := range strings.Split(manifest, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "image" {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	t.Fatalf("no sandbox.image in the manifest:\n%s", manifest)
	return ""
}

// tagAndImport tags a local image as ref on the Docker Engine and imports it into
// the cluster under that name.
func tagAndImport(t *testing.T, local, ref string) {
	t.Helper()
	ctx := context.Background()
	cli := testenv.Client(t)
	if err := cli.ImageTag(ctx, local, ref); err != nil {
		t.Fatalf("cannot tag %s as %s: %v", local, ref, err)
	}
	if err := testenv.KubeImportImage(ctx, cli, repoFile("scripts/kube.sh"), ref); err != nil {
		t.Fatal(err)
	}
}

// TestVaultSecretOnCluster: a vault value reaches the main command, a daemon and a
// wrapped service over the Pod exec API, and is in no Kubernetes object.
func TestVaultSecretOnCluster(t *testing.T) {
	const value = "s3cr3t-on-the-cluster-42"
	e, cs := newEnv(t, `[sandbox]
image = "{{image}}"

[env]
TOKEN = "${VAULT_TOK}"

[daemons.user]
command = ["sh", "-c", "echo \"$DTOK\" > /dev/shm/dtok; exec sleep 1000"]
env = { DTOK = "${VAULT_TOK}" }
ready = { cmd = ["test", "-s", "/dev/shm/dtok"], timeout = "20s" }

[services.svc]
image = "{{image}}"
command = ["sh", "-c", "mkdir -p /dev/shm/www && echo \"$SVCTOK\" > /dev/shm/www/t && exec httpd -f -p 9191 -h /dev/shm/www"]
env = { SVCTOK = "${VAULT_TOK}" }
required = true
healthcheck = { cmd = ["wget", "-q", "-O", "/dev/null", "http://127.0.0.1:9191/t"], interval = "500ms", retries = 60 }
`)
	e.Extra = append(e.Extra, "AIRLOCK_VAULT_PASSPHRASE=correct horse battery")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	set := e.Command(ctx, "secrets", "set", "VAULT_TOK", "--stdin")
	set.Stdin = strings.NewReader(value + "\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("secrets set: %v\n%s", err, out)
	}
	e.MustRun("up", "-d")
	r := e.MustRun("exec", "--", "sh", "-c", "echo main=$TOKEN; echo daemon=$(cat /dev/shm/dtok); echo service=$(wget -qO- http://svc:9191/t)")
	for _, want := range []string{"main=" + value, "daemon=" + value, "service=" + value} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("exec output lacks %q: %s", want, r)
		}
	}
	for _, p := range projectPods(t, cs, e.Project) {
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces", namespace, "pods", p.Name).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), value) {
			t.Errorf("the secret is in Pod %s", p.Name)
		}
	}
	secrets, err := cs.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) > 0 {
		t.Errorf("airlock made Kubernetes Secrets: %d", len(secrets.Items))
	}
	e.MustRun("down")
	waitNoPods(t, cs, e.Project, 10*time.Second)
}

// TestRunOutputOnCluster: run --output copies a result back from the Pod into the
// project dir.
func TestRunOutputOnCluster(t *testing.T) {
	e, cs := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	r := e.Run("run", "--output", "dist", "--", "sh", "-c", "mkdir -p dist/sub && echo built > dist/app.txt && echo deep > dist/sub/x.txt")
	if r.Code != 0 {
		t.Fatalf("run --output: %s", r)
	}
	for rel, want := range map[string]string{"dist/app.txt": "built\n", "dist/sub/x.txt": "deep\n"} {
		b, err := os.ReadFile(filepath.Join(e.Project, rel))
		if err != nil || string(b) != want {
			t.Errorf("%s: want %q, got %q (%v)", rel, want, b, err)
		}
	}
	waitNoPods(t, cs, e.Project, 10*time.Second)

	// A quick main command of a kept run is recorded stopped, not failed: its
	// status stream is read through the keeper once the primary ended.
	r = e.Run("run", "--keep", "--label", "t=kept", "--", "true")
	if r.Code != 0 {
		t.Fatalf("run --keep: %s", r)
	}
	ps := e.MustRun("ps", "-a").Stdout
	if !strings.Contains(ps, "stopped") || strings.Contains(ps, "failed") {
		t.Errorf("ps -a after run --keep -- true: want it stopped, got\n%s", ps)
	}
	e.MustRun("rm", "--label", "t=kept")
	waitNoPods(t, cs, e.Project, 10*time.Second)
}

// TestOOMKilledOnCluster: a main command the cluster kills for its memory limit
// fails the sandbox as oom_killed, exit 137.
func TestOOMKilledOnCluster(t *testing.T) {
	e, cs := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\nmemory = \"32m\"\n")
	id := "oom-" + strings.ToLower(fmt.Sprint(time.Now().UnixNano()%1e9))
	r := e.Run("run", "--id", id, "--", "sh", "-c", "head -c 200m /dev/zero | tail")
	if r.Code != 137 {
		t.Errorf("want exit 137 from the OOM kill, got %s", r)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ev := e.MustRun("events", id).Stdout
		if strings.Contains(ev, "oom_killed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the events do not say oom_killed:\n%s", ev)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitNoPods(t, cs, e.Project, 10*time.Second)
}

// TestNonRootUserOnCluster: a numeric sandbox.user runs the main command, reads the
// copied project and writes into it.
func TestNonRootUserOnCluster(t *testing.T) {
	e, cs := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\nuser = \"65534:65534\"\n")
	e.WriteFile("data.txt", "readable\n")
	r := e.Run("run", "--", "sh", "-c", "id -u; id -g; cat data.txt; touch written && echo wrote")
	if r.Code != 0 || !strings.Contains(r.Stdout, "65534\n65534\nreadable\nwrote") {
		t.Errorf("want uid and gid 65534, the project read and written, got %s", r)
	}
	waitNoPods(t, cs, e.Project, 10*time.Second)
}

// TestRootStepBesideNonRootUserOnCluster: a root one-shot step beside
// sandbox.user 65534:65534 makes the Pod's main container run as root; the
// main command and an exec still run as 65534, read and write the copied
// project, write the folder the step gave them and cannot write the step's
// root file.
func TestRootStepBesideNonRootUserOnCluster(t *testing.T) {
	e, cs := newEnv(t, `[sandbox]
image = "{{image}}"
user = "65534:65534"

[daemons.setup]
oneshot = true
user = "root"
command = ["sh", "-c", "echo 'root only' > /tmp/root-only && chmod 644 /tmp/root-only && mkdir -p /owned && chown 65534:65534 /owned"]
`)
	e.WriteFile("data.txt", "readable\n")
	script := "id -u; cat data.txt; touch written && echo wrote; touch /owned/x && echo owned; if echo x >> /tmp/root-only; then echo wrote-root; else echo refused; fi"
	r := e.Run("run", "--", "sh", "-c", script)
	if r.Code != 0 || !strings.Contains(r.Stdout, "65534\nreadable\nwrote\nowned\nrefused\n") {
		t.Errorf("want uid 65534, the project read and written, the step's folder written and its root file refused, got %s", r)
	}
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	if r := e.Run("exec", "--", "sh", "-c", "id -u; touch written-by-exec && echo wrote"); r.Code != 0 || r.Stdout != "65534\nwrote\n" {
		t.Errorf("exec: want uid 65534 writing the project, got %s", r)
	}
	// The files API writes as the sandbox user, not as the container's root.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := client.New(e.Socket()).WriteFile(ctx, id, "/tmp/put/by-api.txt", strings.NewReader("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := e.Run("exec", "--", "stat", "-c", "%u:%g", "/tmp/put", "/tmp/put/by-api.txt"); r.Stdout != "65534:65534\n65534:65534\n" {
		t.Errorf("what the files API wrote: %s", r)
	}
	e.MustRun("down")
	waitNoPods(t, cs, e.Project, 10*time.Second)
}

// TestDaemonRestartOnCluster: a new control daemon finds an up sandbox's Pod again:
// ps shows it ready, exec runs in it, down removes it.
func TestDaemonRestartOnCluster(t *testing.T) {
	e, cs := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	e.StopDaemon()
	if ps := e.MustRun("ps").Stdout; !strings.Contains(ps, id) || !strings.Contains(ps, "ready") {
		t.Errorf("after a daemon restart, ps does not show %s ready:\n%s", id, ps)
	}
	if r := e.Run("exec", "--", "sh", "-c", "exit 4"); r.Code != 4 {
		t.Errorf("exec after a daemon restart: want exit 4, got %s", r)
	}
	e.MustRun("down")
	waitNoPods(t, cs, e.Project, 10*time.Second)
}

// TestIdleTTLOnCluster: an up sandbox nobody uses for runtime.idle_ttl is stopped,
// which deletes its Pod.
func TestIdleTTLOnCluster(t *testing.T) {
	e, cs := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	cfg := filepath.Join(e.Config, "airlock", "config.toml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(b), "[runtime]\n", "[runtime]\nidle_ttl = \"2s\"\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	waitNoPods(t, cs, e.Project, 30*time.Second)
	if ps := e.MustRun("ps", "-a").Stdout; !strings.Contains(ps, id) || !strings.Contains(ps, "stopped") {
		t.Errorf("after idle_ttl, ps -a does not show %s stopped:\n%s", id, ps)
	}
	e.MustRun("rm", id)
}

// TestPodRefusedOnCluster: a Pod the cluster refuses (a quota of no Pods) fails the
// run at once with the cluster's reason, exit 125, and leaves nothing.
func TestPodRefusedOnCluster(t *testing.T) {
	const ns = "airlock-e2e-quota"
	e, cs := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pods"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	cfg := filepath.Join(e.Config, "airlock", "config.toml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(b), namespace, ns, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.Run("run", "--", "true")
	if r.Code != 125 || !strings.Contains(r.Stderr, "exceeded quota") || strings.Contains(r.Stderr, "cannot confirm") {
		t.Errorf("want exit 125 naming the quota (and no removal left unconfirmed), got %s", r)
	}
	if ps := e.MustRun("ps", "-a").Stdout; strings.Count(ps, "\n") > 1 {
		t.Errorf("the refused run left a sandbox:\n%s", ps)
	}
}

// TestPodDeletedUnderRun: a run whose Pod is deleted behind airlock's back (by hand,
// an eviction, a lost node) ends with exit 125 saying so, and the daemon records
// the sandbox's end.
func TestPodDeletedUnderRun(t *testing.T) {
	e, cs := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	id := "gone-" + strings.ToLower(fmt.Sprint(time.Now().UnixNano()%1e9))
	p := e.Start("run", "--id", id, "--", "sh", "-c", "echo started; sleep 300")
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(p.Stdout.String(), "started") {
		if time.Now().After(deadline) {
			t.Fatalf("the main command did not start: %s %s", p.Stdout.String(), p.Stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	zero := int64(0)
	if err := cs.CoreV1().Pods(namespace).Delete(context.Background(), kube.PodName(id), metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	r := p.MustWait(t, time.Minute)
	if r.Code != 125 || !strings.Contains(r.Stderr, "was deleted before its main command ended") {
		t.Errorf("want exit 125 saying the Pod was deleted, got %s", r)
	}
	waitNoPods(t, cs, e.Project, 10*time.Second)
}

// TestEveryCommandThroughTheDaemonOnCluster: the CLI reaches the cluster only
// through the daemon. With KUBECONFIG an empty file, DOCKER_HOST a dead socket
// and AIRLOCK_HOST naming a daemon started beforehand with the real ones, the
// README's commands work on the kubernetes backend: run (output, exit code),
// up -d, exec, ps, logs, events, stop, up with a piped shell, down; no Pod is
// left.
func TestEveryCommandThroughTheDaemonOnCluster(t *testing.T) {
	e, cs := newEnv(t, `[sandbox]
image = "{{image}}"

[daemons.ticker]
command = ["sh", "-c", "echo ticker-up; exec sleep 3600"]
ready = { log = "ticker-up", timeout = "30s" }
`)
	e.WriteFile("data.txt", "project-file\n")
	e.MustRun("daemon", "start")
	empty := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e.Extra = append(e.Extra, "KUBECONFIG="+empty, "DOCKER_HOST=unix://"+filepath.Join(t.TempDir(), "dead.sock"),
		"AIRLOCK_HOST=unix://"+e.Socket())

	r := e.Run("run", "--", "sh", "-c", "cat data.txt; echo err >&2; exit 6")
	if r.Code != 6 || r.Stdout != "project-file\n" || !strings.Contains(r.Stderr, "err") {
		t.Errorf("run: want exit 6 and its output, got %s", r)
	}
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	if r = e.Run("exec", "--", "sh", "-c", "cat data.txt; exit 4"); r.Code != 4 || r.Stdout != "project-file\n" {
		t.Errorf("exec: %s", r)
	}
	if r = e.Run("ps"); r.Code != 0 || !strings.Contains(r.Stdout, id) {
		t.Errorf("ps: want %s, got %s", id, r)
	}
	if r = e.Run("logs", "ticker"); r.Code != 0 || !strings.Contains(r.Stdout, "ticker-up") {
		t.Errorf("logs ticker: %s", r)
	}
	if r = e.Run("events", id); r.Code != 0 || !strings.Contains(r.Stdout, "sandbox.ready") {
		t.Errorf("events: %s", r)
	}
	if r = e.Run("stop"); r.Code != 0 {
		t.Errorf("stop: %s", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clitest.CmdTimeout)
	defer cancel()
	cmd := e.Command(ctx, "up")
	cmd.Stdin = strings.NewReader("cat data.txt; exit 3\n")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || string(out) != "project-file\n" {
		t.Errorf("up with a piped shell: want exit 3 and the project file, got %v, stdout %q", err, out)
	}
	e.MustRun("down")
	waitNoPods(t, cs, e.Project, 30*time.Second)
}

// TestWarmPoolOnCluster (issue 23): a manifest with [sandbox.pool] keeps a
// parked Pod (its value-free daemon ready); a run takes it (pool.claimed),
// gets its output, exit code and the run's substituted value, and the pool
// refills; drain leaves no Pod.
func TestWarmPoolOnCluster(t *testing.T) {
	e, cs := newEnv(t, `[sandbox]
image = "{{image}}"

[sandbox.pool]
size = 1

[env]
GREETING = "${AIRLOCK_E2E_GREETING}"

[daemons.static]
command = ["sh", "-c", "echo parked > /tmp/static; exec sleep 1000"]
ready = { cmd = ["test", "-e", "/tmp/static"] }
`)
	t.Cleanup(func() { e.Run("pool", "drain") })
	greet := []string{"AIRLOCK_E2E_GREETING=warm-cluster"}
	if r := e.RunEnv(greet, "pool", "warm"); r.Code != 0 || !strings.Contains(r.Stdout, "1 ready") {
		t.Fatalf("pool warm: %s", r)
	}
	r := e.RunEnv(greet, "--log-level", "debug", "run", "--", "sh", "-c", `echo "$GREETING $(cat /tmp/static)"; hostname; exit 4`)
	if r.Code != 4 || !strings.Contains(r.Stdout, "warm-cluster parked") || !strings.Contains(r.Stderr, "warm pool: hit") {
		t.Fatalf("warm run on the cluster: %s", r)
	}
	// A claimed Pod's run ends as a cold one: recorded stopped, not failed.
	// (Its hostname is its ID.)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	id := lines[len(lines)-1]
	var hist string
	testenv.Eventually(t, 30*time.Second, "the run's sandbox to be deleted", func() bool {
		hist = e.MustRun("events", id).Stdout
		return strings.Contains(hist, "sandbox.deleted")
	})
	if !strings.Contains(hist, "main.exited") || !strings.Contains(hist, "sandbox.stopped") || strings.Contains(hist, "sandbox.failed") {
		t.Errorf("the warm run's history is not that of a run that ended:\n%s", hist)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out := e.MustRun("pool", "ls", "--json").Stdout
		var list client.PoolList
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Pools) == 1 && list.Pools[0].Ready == 1 && list.Pools[0].Hits == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool was not refilled: %s", out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	e.MustRun("pool", "drain")
	waitNoPods(t, cs, e.Project, time.Minute)
}
