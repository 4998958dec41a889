//go:build kube

package kube_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/airlock-dev/airlock/backend/kube"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

// The test cluster's second node (scripts/kube.sh up starts two).
const node2 = "airlock-node2"

// Airlock's toleration of a lost node's taints (kube/podsettings.go) and the
// test cluster's node-monitor grace period and period (scripts/kube.sh).
const (
	tolerationSeconds = 20 * time.Second
	nodeMonitorGrace  = 12 * time.Second
	nodeMonitorPeriod = 2 * time.Second
)

// needTwoNodes fails the test unless the cluster has node 2 (and node 1).
func needTwoNodes(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	for _, n := range []string{"localhost", node2} {
		if _, err := cs.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{}); err != nil {
			t.Fatalf("the test cluster has no node %s (scripts/kube.sh up starts two): %v", n, err)
		}
	}
}

// pinTo sets [kubernetes] node_selector in the environment's config.toml: its
// sandboxes run on node only.
func pinTo(t *testing.T, e *clitest.Env, node string) {
	t.Helper()
	cfg := filepath.Join(e.Config, "airlock", "config.toml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, `node_selector = { "kubernetes.io/hostname" = "`+node+`" }`+"\n"...)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// nodeOf is the node the sandbox's Pod runs on.
func nodeOf(t *testing.T, cs kubernetes.Interface, id string) string {
	t.Helper()
	p, err := cs.CoreV1().Pods(namespace).Get(context.Background(), kube.PodName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cannot read the Pod of sandbox %s: %v", id, err)
	}
	return p.Spec.NodeName
}

// kubeScript runs scripts/kube.sh with args.
func kubeScript(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(repoFile("scripts/kube.sh"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/kube.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// waitStarted waits until the run printed "started".
func waitStarted(t *testing.T, p *clitest.Proc) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, "the run's main command to start", func() bool {
		return strings.Contains(p.Stdout.String(), "started")
	})
}

// failedWith waits until sandbox id is recorded failed (ps -a) with an event
// sandbox.failed whose reason holds every one of want; it returns the events.
func failedWith(t *testing.T, e *clitest.Env, id string, within time.Duration, want ...string) string {
	t.Helper()
	var hist string
	testenv.Eventually(t, within, "sandbox "+id+" to be recorded failed", func() bool {
		hist = e.MustRun("events", id).Stdout
		return strings.Contains(hist, "sandbox.failed")
	})
	for _, w := range want {
		if !strings.Contains(hist, w) {
			t.Errorf("the events of sandbox %s do not say %q:\n%s", id, w, hist)
		}
	}
	for _, s := range e.PS() {
		if s.ID == id && s.State != "failed" {
			t.Errorf("ps -a: sandbox %s is %s, want failed", id, s.State)
		}
	}
	for _, line := range strings.Split(hist, "\n") {
		if strings.Contains(line, "sandbox.failed") {
			t.Logf("events: %s", strings.TrimSpace(line))
		}
	}
	return hist
}

// TestSpreadOverTwoNodes: sandboxes run on either node of the two-node test
// cluster, chosen by [kubernetes] node_selector; on node 2 (its own kubelet
// and containerd) a run gets its output and code, and exec and logs work in an
// up sandbox; down leaves nothing.
func TestSpreadOverTwoNodes(t *testing.T) {
	manifest := `[sandbox]
image = "{{image}}"

[daemons.ticker]
command = ["sh", "-c", "echo ticker-up on $(hostname); exec sleep 3600"]
ready = { log = "ticker-up", timeout = "30s" }
`
	seen := map[string]string{} // node → sandbox
	for _, node := range []string{"localhost", node2} {
		e, cs := newEnv(t, manifest)
		needTwoNodes(t, cs)
		pinTo(t, e, node)
		e.WriteFile("data.txt", "project-on-"+node+"\n")
		if r := e.Run("run", "--", "sh", "-c", "cat data.txt; exit 5"); r.Code != 5 || r.Stdout != "project-on-"+node+"\n" {
			t.Errorf("run on %s: want exit 5 and the project file, got %s", node, r)
		}
		id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
		if got := nodeOf(t, cs, id); got != node {
			t.Errorf("sandbox %s runs on node %q, want %q (node_selector)", id, got, node)
		}
		seen[node] = id
		if r := e.Run("exec", "--", "sh", "-c", "cat data.txt; exit 4"); r.Code != 4 || r.Stdout != "project-on-"+node+"\n" {
			t.Errorf("exec on %s: %s", node, r)
		}
		if r := e.Run("logs", "ticker"); r.Code != 0 || !strings.Contains(r.Stdout, "ticker-up on "+id) {
			t.Errorf("logs ticker on %s: %s", node, r)
		}
		if r := e.Run("ps"); r.Code != 0 || !strings.Contains(r.Stdout, id) {
			t.Errorf("ps: want %s, got %s", id, r)
		}
		e.MustRun("down")
		waitNoPods(t, cs, e.Project, 30*time.Second)
	}
	t.Logf("sandboxes by node: %v", seen)
}

// TestNodeLost: node 2 stops answering (scripts/kube.sh node stop 2: its
// kubelet and containerd killed, its containers left running, as a machine cut
// off). A run on it ends with exit 125 naming the node and why, and an up -d
// sandbox on it is recorded failed with that reason, both within the
// node-monitor grace period, airlock's 20 s toleration and some slack; once
// the node is back its kubelet ends the evicted Pods and nothing of the
// sandboxes is left on the cluster.
func TestNodeLost(t *testing.T) {
	e, cs := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	needTwoNodes(t, cs)
	pinTo(t, e, node2)
	up := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	runID := "lost-" + fmt.Sprint(time.Now().UnixNano()%1e9)
	p := e.Start("run", "--id", runID, "--", "sh", "-c", "echo started; sleep 300")
	waitStarted(t, p)
	for _, id := range []string{up, runID} {
		if got := nodeOf(t, cs, id); got != node2 {
			t.Fatalf("sandbox %s runs on %q, want %s", id, got, node2)
		}
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			kubeScript(t, "node", "start", "2")
		}
	})
	stopped := time.Now()
	kubeScript(t, "node", "stop", "2")
	// Marked lost within grace + period, evicted 20 s later (the taint
	// manager's queue and the watch add a little).
	limit := nodeMonitorGrace + nodeMonitorPeriod + tolerationSeconds + 20*time.Second
	r := p.MustWait(t, limit)
	runEnded := time.Since(stopped)
	want := "was evicted from node " + node2 + ": the node stopped answering (node.kubernetes.io/unreachable)"
	if r.Code != 125 || !strings.Contains(r.Stderr, want) {
		t.Errorf("the run: want exit 125 saying %q, got %s", want, r)
	}
	t.Logf("the run: %s", strings.TrimSpace(r.Stderr))
	failedWith(t, e, up, max(limit-time.Since(stopped), 10*time.Second), "its Pod was evicted from node "+node2, "the node stopped answering")
	upFailed := time.Since(stopped)
	t.Logf("node 2 stopped: the run ended (125) after %.1f s, the up sandbox was recorded failed after %.1f s (grace %v + period %v + toleration %v)",
		runEnded.Seconds(), upFailed.Seconds(), nodeMonitorGrace, nodeMonitorPeriod, tolerationSeconds)

	back := time.Now()
	kubeScript(t, "node", "start", "2")
	restarted = true
	e.MustRun("down")
	waitNoPods(t, cs, e.Project, 2*time.Minute)
	noContainersOnNode2(t)
	t.Logf("node 2 back: its evicted Pods gone after %.1f s", time.Since(back).Seconds())
}

// noContainersOnNode2 fails when node 2's containerd still runs a container of
// a Pod of the tests' namespace (its kubelet, back, must have ended them).
func noContainersOnNode2(t *testing.T) {
	t.Helper()
	kc, err := exec.Command(repoFile("scripts/kube.sh"), "kubeconfig").Output()
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(filepath.Dir(strings.TrimSpace(string(kc))), "node2", "containerd.sock")
	ctr := func(args ...string) string {
		out, err := exec.Command("ctr", append([]string{"--address", sock, "-n", "k8s.io"}, args...)...).Output()
		if err != nil {
			t.Fatalf("ctr %s on node 2: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	var left []string
	testenv.Eventually(t, time.Minute, "node 2's containers of the tests' namespace to end", func() bool {
		ours := map[string]bool{}
		for _, id := range strings.Fields(ctr("containers", "ls", "-q", `labels."io.kubernetes.pod.namespace"==`+namespace)) {
			ours[id] = true
		}
		left = left[:0]
		for _, line := range strings.Split(ctr("tasks", "ls"), "\n") {
			if f := strings.Fields(line); len(f) == 3 && ours[f[0]] && f[2] == "RUNNING" {
				left = append(left, f[0])
			}
		}
		return len(left) == 0
	})
}

// TestEvictedPod: the Eviction API (policy/v1, what a drain uses) on the Pod of
// a run ends the run with exit 125 naming the eviction, and on the Pod of an up
// sandbox records it failed, reason evicted; nothing is left.
func TestEvictedPod(t *testing.T) {
	e, cs := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	ctx := context.Background()
	up := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	runID := "evicted-" + fmt.Sprint(time.Now().UnixNano()%1e9)
	p := e.Start("run", "--id", runID, "--", "sh", "-c", "echo started; sleep 300")
	waitStarted(t, p)
	evict := func(id string) {
		t.Helper()
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: kube.PodName(id), Namespace: namespace}}
		if err := cs.CoreV1().Pods(namespace).EvictV1(ctx, ev); err != nil {
			t.Fatalf("cannot evict the Pod of %s: %v", id, err)
		}
	}
	node := nodeOf(t, cs, runID)
	evict(runID)
	r := p.MustWait(t, time.Minute)
	want := "was evicted from node " + node + " through the Eviction API"
	if r.Code != 125 || !strings.Contains(r.Stderr, want) {
		t.Errorf("the run: want exit 125 saying %q, got %s", want, r)
	}
	t.Logf("the run: %s", strings.TrimSpace(r.Stderr))
	node = nodeOf(t, cs, up)
	evict(up)
	failedWith(t, e, up, time.Minute, "its Pod was evicted from node "+node+" through the Eviction API")
	e.MustRun("down")
	waitNoPods(t, cs, e.Project, time.Minute)
}
