// Command benchkube measures `airlock run -- true` on a Kubernetes cluster (the
// project's own, scripts/kube.sh) against `kubectl run --rm -i --restart=Never` of
// the same image in the same run, interleaved, and records the medians in
// docs/benchmarks.md under "## Kubernetes". scripts/bench-kube.sh runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/test/testenv"
)

const namespace = "airlock-bench"

func main() {
	o := benchdoc.Flags("scripts/bench-kube.sh")
	runs := flag.Int("runs", 10, "runs of each command")
	kubeconfig := flag.String("kubeconfig", "", "the cluster's kubeconfig")
	kubectl := flag.String("kubectl", "kubectl", "the kubectl binary (the baseline only)")
	up := flag.Int("up", 0, "instead: this many `up -d` sandboxes alive at once against as many plain Pods (alive.go)")
	workers := flag.Int("workers", 8, "with -up: commands at a time")
	flag.Parse()
	benchdoc.Exit("benchkube", bench(o.Airlock, *runs, o.Doc, o.Command, *kubeconfig, *kubectl, *up, *workers))
}

func bench(airlock string, runs int, doc, command, kubeconfig, kubectl string, up, workers int) error {
	ctx := context.Background()
	b, err := benchdoc.OpenBusybox(ctx, airlock, "airlock-bench-kube-", benchdoc.PlainManifest)
	if err != nil {
		return err
	}
	defer b.Close()
	airlock, image, p := b.Airlock, b.Image, b.Project
	// The cluster gets the busybox image and the airlock image of this binary.
	const script = "scripts/kube.sh"
	if err := testenv.KubeImportImage(ctx, b.Engine, script, image); err != nil {
		return err
	}
	airlockImage, err := testenv.KubeImportAirlock(ctx, script, "")
	if err != nil {
		return err
	}
	if err := p.Configure(fmt.Sprintf("[runtime]\nbackend = \"kubernetes\"\n\n[kubernetes]\nnamespace = %q\nimage = %q\n", namespace, airlockImage)); err != nil {
		return err
	}
	p.Env = append(p.Env, "KUBECONFIG="+kubeconfig)
	kctl := func(args ...string) []string {
		return append([]string{"--kubeconfig", kubeconfig, "-n", namespace}, args...)
	}
	// Warm up both paths (and make the namespace).
	if _, out, err := p.Timed(airlock, "run", "--", "true"); err != nil {
		return fmt.Errorf("airlock run on the cluster: %v: %s", err, out)
	}
	if up > 0 {
		if command == "scripts/bench-kube.sh" {
			command = "scripts/bench-kube-alive.sh"
		}
		return alive(b, up, workers, kubectl, kctl, doc, command)
	}
	// The same run from a warm pool of 1 (docs/pool.md): a second project.
	warmDir, err := p.AddDir("warm-project", map[string]string{"sandbox.toml": fmt.Sprintf("[sandbox]\nimage = %q\n[sandbox.pool]\nsize = 1\n", image)})
	if err != nil {
		return err
	}
	c := p.Client()
	warmRun := func() (time.Duration, error) {
		cmd := p.Command(airlock, "run", "--", "true")
		cmd.Dir = warmDir
		d, out, err := benchdoc.Timed(cmd)
		if err != nil {
			return 0, fmt.Errorf("warm airlock run: %v: %s", err, out)
		}
		return d, nil
	}
	refilled := func() {
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if pl := benchdoc.PoolOf(ctx, c, warmDir); pl.Ready >= 1 && pl.Starting == 0 {
				return
			}
		}
	}
	if _, out, err := p.Timed(airlock, "--project", warmDir, "--file", filepath.Join(warmDir, "sandbox.toml"), "pool", "warm"); err != nil {
		return fmt.Errorf("airlock pool warm on the cluster: %v: %s", err, out)
	}
	var ka, kk, kw []time.Duration
	for i := 0; i <= runs; i++ {
		refilled()
		settle(p, kubectl, kctl)
		d, err := warmRun()
		if err != nil {
			return err
		}
		if i > 0 {
			kw = append(kw, d)
		}
		refilled()
		settle(p, kubectl, kctl)
		d, out, err := p.Timed(airlock, "run", "--", "true")
		if err != nil {
			return fmt.Errorf("airlock run: %v: %s", err, out)
		}
		if i > 0 {
			ka = append(ka, d)
		}
		name := fmt.Sprintf("bench-kubectl-%d-%d", os.Getpid(), i)
		d, out, err = p.Timed(kubectl, kctl("run", name, "--rm", "-i", "--restart=Never", "--quiet",
			"--image="+image, "--image-pull-policy=Never", "--command", "--", "true")...)
		if err != nil {
			return fmt.Errorf("kubectl run: %v: %s", err, out)
		}
		if i > 0 {
			kk = append(kk, d)
		}
		settle(p, kubectl, kctl)
	}
	ma, mk := benchdoc.Median(ka), benchdoc.Median(kk)
	rows := []benchdoc.Row{
		{Measure: fmt.Sprintf("`kubectl run --rm -i --restart=Never --image=IMAGE -- true` (median of %d)", runs), Result: benchdoc.MS(mk)},
		{Measure: "`airlock run -- true` with `backend = \"kubernetes\"` (median)", Result: benchdoc.MS(ma)},
		{Measure: "ratio airlock / kubectl", Result: benchdoc.Ratio(ma, mk)},
		{Measure: "warm `airlock run -- true` from a pool of 1 (a parked Pod claimed; median)", Result: benchdoc.MS(benchdoc.Median(kw))},
		{Measure: "warm ratio airlock / kubectl", Result: benchdoc.Ratio(benchdoc.Median(kw), mk), Target: "≤ 0.15×"},
	}
	_, _, _ = p.Timed(airlock, "--project", warmDir, "pool", "drain")
	benchdoc.Print(80, rows)
	intro := fmt.Sprintf("By `%s` against the project's two-node Kubernetes v1.34.2 on one machine (scripts/kube.sh: each node its own kubelet and containerd, bridge CNI), %s; image: the local busybox test image, imported into the cluster; runs interleaved.", command, benchdoc.Machine())
	notes := "Both start one Pod from an image already on the node and return the exit code of `true`; kubectl (v1.34.2, built with the cluster;\n" +
		"the baseline only) attaches and deletes the Pod (`--rm`). airlock's Pod holds an init container that installs the supervisor,\n" +
		"and its daemon copies the project in over Pod exec and releases the held supervisor with a second exec before the command runs;\n" +
		"`run` returns once the primary ended, and the daemon deletes the Pod. Each run waits (untimed) until no Pod of the namespace is left."
	return benchdoc.Write(doc, "Kubernetes", intro, rows, notes)
}

// settle waits until no Pod is left in the namespace but a warm pool's.
func settle(p *benchdoc.Project, kubectl string, kctl func(...string) []string) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, err := p.Command(kubectl, kctl("get", "pods", "-l", "!"+backend.LabelPool, "-o", "name")...).Output()
		if err == nil && strings.TrimSpace(string(out)) == "" {
			return
		}
	}
}
