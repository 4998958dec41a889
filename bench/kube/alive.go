package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/bench/benchdoc"
)

// alive measures n `up -d` sandboxes alive at once on the cluster (issue 25),
// in n project dirs of one user (one control daemon), against n plain Pods of
// the same image made with kubectl, workers at a time both: the time until all
// are ready, how they spread over the nodes, `ps` with all of them, and
// `down` (the Pods' delete) of all, after which no Pod may be left. It records
// docs/benchmarks.md "## Kubernetes, many alive at once".
func alive(b *benchdoc.Busybox, n, workers int, kubectl string, kctl func(...string) []string, doc, command string) error {
	airlock, image, p := b.Airlock, b.Image, b.Project
	a, err := p.Alive(airlock, b.Manifest, n, workers)
	if err != nil {
		return err
	}
	// byNode counts the namespace's running Pods (selected by sel) by node.
	byNode := func(sel string) (map[string]int, error) {
		out, err := p.Command(kubectl, kctl("get", "pods", "-l", sel, "--field-selector=status.phase=Running",
			"-o", "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}")...).Output()
		if err != nil {
			return nil, fmt.Errorf("kubectl get pods: %v", err)
		}
		m := map[string]int{}
		for _, node := range strings.Fields(string(out)) {
			m[node]++
		}
		return m, nil
	}
	spread := func(m map[string]int) string {
		var parts []string
		for node, c := range m {
			parts = append(parts, fmt.Sprintf("%s %d", node, c))
		}
		sort.Strings(parts)
		return strings.Join(parts, ", ")
	}
	left := func(sel string) int {
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
			out, err := p.Command(kubectl, kctl("get", "pods", "-l", sel, "-o", "name")...).Output()
			c := len(strings.Fields(string(out)))
			if (err == nil && c == 0) || time.Now().After(deadline) {
				if err != nil {
					return -1
				}
				return c
			}
		}
	}

	// airlock: up -d in every dir (it returns once the sandbox is ready).
	upTook, upErrs := a.Up()
	aNodes, err := byNode("dev.airlock.role=primary")
	if err != nil {
		return err
	}
	ps, err := a.PS()
	if err != nil {
		return err
	}
	downTook, downErrs := a.Down()
	aLeft := left("dev.airlock.role=primary")

	// kubectl: n plain Pods of the same image, made the same way (workers at a
	// time), then waited for until all are Ready.
	const plain = "airlock-bench-plain=1"
	start := time.Now()
	_, kErrs := benchdoc.Each(n, workers, func(i int) error {
		name := fmt.Sprintf("bench-plain-%d-%d", os.Getpid(), i)
		if _, out, err := p.Timed(kubectl, kctl("run", name, "--labels="+plain, "--restart=Never", "--image="+image,
			"--image-pull-policy=Never", "--command", "--", "sleep", "100000")...); err != nil {
			return fmt.Errorf("kubectl run %s: %v: %s", name, err, out)
		}
		return nil
	})
	if _, out, err := p.Timed(kubectl, kctl("wait", "--for=condition=Ready", "pod", "-l", plain, "--timeout=10m")...); err != nil {
		kErrs = append(kErrs, fmt.Errorf("kubectl wait: %v: %s", err, out))
	}
	kTook := time.Since(start)
	kNodes, err := byNode(plain)
	if err != nil {
		return err
	}
	start = time.Now()
	if _, out, err := p.Timed(kubectl, kctl("delete", "pods", "-l", plain, "--grace-period=0", "--wait=true", "--timeout=5m")...); err != nil {
		kErrs = append(kErrs, fmt.Errorf("kubectl delete: %v: %s", err, out))
	}
	kDel := time.Since(start)
	kLeft := left(plain)

	failures := len(upErrs) + len(downErrs)
	for _, e := range append(append(upErrs, downErrs...), kErrs...) {
		fmt.Fprintln(os.Stderr, "benchkube:", e)
	}
	count := func(m map[string]int) int {
		t := 0
		for _, c := range m {
			t += c
		}
		return t
	}
	rows := []benchdoc.Row{
		{Measure: fmt.Sprintf("%d `airlock up -d` (%d at a time): wall time until all returned, ready; running by node", n, workers),
			Result: fmt.Sprintf("%s, %d of %d; %s", benchdoc.MS(upTook), count(aNodes), n, spread(aNodes)), Target: fmt.Sprintf("%d of %d, both nodes", n, n)},
		{Measure: fmt.Sprintf("%d plain Pods, `kubectl run --restart=Never` of the same image (%d at a time), until all Ready; by node", n, workers),
			Result: fmt.Sprintf("%s, %d of %d; %s", benchdoc.MS(kTook), count(kNodes), n, spread(kNodes))},
		{Measure: "ratio airlock / plain Pods (time to all ready)", Result: benchdoc.Ratio(upTook, kTook)},
		{Measure: fmt.Sprintf("`airlock ps` with %d sandboxes (median of 10; the CLI's whole run)", n), Result: benchdoc.MS(benchdoc.Median(ps)), Target: "≤ 100 ms"},
		{Measure: fmt.Sprintf("`airlock down` of all %d (%d at a time): wall time; failures", n, workers), Result: fmt.Sprintf("%s; %d", benchdoc.MS(downTook), failures)},
		{Measure: fmt.Sprintf("`kubectl delete pods` of the %d plain Pods (grace 0, waited for)", n), Result: benchdoc.MS(kDel)},
		{Measure: "Pods left after the last down / delete", Result: fmt.Sprintf("%d / %d", aLeft, kLeft), Target: "0 / 0"},
	}
	benchdoc.Print(110, rows)
	if failures+len(kErrs) > 0 {
		return fmt.Errorf("%d failure(s)", failures+len(kErrs))
	}
	intro := fmt.Sprintf("By `%s` against the project's two-node Kubernetes v1.34.2 on one machine (scripts/kube.sh: nodes localhost and airlock-node2, each its own kubelet and containerd), %s; image: the local busybox test image, imported into both nodes; one user (one control daemon), %d project dirs.", command, benchdoc.Machine(), n)
	notes := "Each sandbox is an `up -d` of its own project dir (no daemon): a Pod with the supervisor's init container, its project copied in\n" +
		"over Pod exec and its supervisor released by a second exec; `up -d` returns once it is ready. The plain Pods run `sleep` from the\n" +
		"same image and are waited for with `kubectl wait --for=condition=Ready`. The scheduler places both: Pods without requests are\n" +
		"scored as asking for its defaults (0.1 CPU, 200 MiB), so they spread evenly. `ps` reads the daemon's records. Both kinds share the\n" +
		"machine's 2 CPUs with the whole cluster (control plane and both nodes)."
	return benchdoc.Write(doc, "Kubernetes, many alive at once", intro, rows, notes)
}
