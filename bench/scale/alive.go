package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/client"
)

// alive measures n `up -d` sandboxes alive at once (issue 25), each with one
// sidecar daemon, in n project dirs of one user (one control daemon): the time
// until all are up, an exec in each, `ps` with all of them, the daemon's
// memory and descriptors, and `down` of all, after which nothing may be left.
// It records docs/benchmarks.md "## Many alive at once".
func alive(airlock string, n, workers int, doc, command string) error {
	ctx := context.Background()
	b, err := benchdoc.OpenBusybox(ctx, airlock, "airlock-bench-alive-", func(image string) string {
		return fmt.Sprintf("[sandbox]\nimage = %q\n\n[daemons.side]\ncommand = [\"sleep\", \"100000\"]\n", image)
	})
	if err != nil {
		return err
	}
	defer b.Close()
	airlock, cli, p := b.Airlock, b.Engine, b.Project
	a, err := p.Alive(airlock, b.Manifest, n, workers)
	if err != nil {
		return err
	}
	// Warm: the daemon, the supervisor volume, the image.
	if _, out, err := p.Timed(airlock, "run", "--", "true"); err != nil {
		return fmt.Errorf("warm-up run: %v\n%s", err, out)
	}
	c := p.Client()
	h, err := c.Health(ctx)
	if err != nil {
		return err
	}

	upTook, upErrs := a.Up()
	list, err := c.List(ctx, nil)
	if err != nil {
		return err
	}
	ready := 0
	for _, sb := range list {
		if sb.State == client.StateReady {
			ready++
		}
	}
	var execs benchdoc.Timings
	var execMu sync.Mutex
	execTook, execErrs := a.Each(func(i int, dir string) error {
		d, out, err := p.TimedIn(dir, airlock, "exec", "--", "sh", "-c", "test -d /proc/1 && echo "+strconv.Itoa(i))
		if err != nil || strings.TrimSpace(out) != strconv.Itoa(i) {
			return fmt.Errorf("exec: %v: %q", err, out)
		}
		execMu.Lock()
		defer execMu.Unlock()
		return execs.Add(d, nil)
	})
	ps, err := a.PS()
	if err != nil {
		return err
	}
	var psAPI benchdoc.Timings
	for range 10 {
		start := time.Now()
		if _, err := c.List(ctx, nil); err != nil {
			return err
		}
		if err := psAPI.Add(time.Since(start), nil); err != nil {
			return err
		}
	}
	cur, rss, fds := procStatus(h.PID)

	downTook, downErrs := a.Down()
	// Nothing left: no container of any of the projects, no network of the daemon's but the shared ones.
	leftC, leftN := -1, -1
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		cs, err1 := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "dev.airlock.owner"))})
		ns, err2 := cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "dev.airlock.sandbox"))})
		if err1 == nil && err2 == nil {
			leftC, leftN = 0, len(ns)
			for _, x := range cs {
				if strings.HasPrefix(x.Labels["dev.airlock.project"], p.Home) {
					leftC++
				}
			}
			if leftC == 0 && leftN == 0 {
				break
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	failures := len(upErrs) + len(execErrs) + len(downErrs)
	for _, e := range append(append(upErrs, execErrs...), downErrs...) {
		fmt.Fprintln(os.Stderr, "benchscale:", e)
	}
	rows := []benchdoc.Row{
		{Measure: fmt.Sprintf("%d `airlock up -d` (one sidecar daemon each; %d at a time): wall time until all returned; ready", n, workers), Result: fmt.Sprintf("%s; %d of %d", benchdoc.MS(upTook), ready, n), Target: fmt.Sprintf("%d of %d", n, n)},
		{Measure: fmt.Sprintf("`airlock exec` in each of the %d (%d at a time): right output; median; wall time", n, workers), Result: fmt.Sprintf("%d of %d; %s; %s", n-len(execErrs), n, benchdoc.MS(benchdoc.Median(execs)), benchdoc.MS(execTook)), Target: fmt.Sprintf("%d of %d", n, n)},
		{Measure: fmt.Sprintf("`airlock ps` with %d sandboxes (median of 10; the CLI's whole run)", n), Result: benchdoc.MS(benchdoc.Median(ps)), Target: "≤ 100 ms"},
		{Measure: fmt.Sprintf("`GET /v1/sandboxes` with %d sandboxes (median of 10)", n), Result: fmt.Sprintf("%.1f ms", float64(benchdoc.Median(psAPI))/1e6)},
		{Measure: fmt.Sprintf("control daemon with %d sandboxes: RSS; peak RSS (VmHWM); open fds", n), Result: cur + "; " + rss + "; " + fds},
		{Measure: fmt.Sprintf("`airlock down` of all %d (%d at a time): wall time; failures", n, workers), Result: fmt.Sprintf("%s; %d", benchdoc.MS(downTook), failures)},
		{Measure: "containers and sandbox networks left 2 min after the last down", Result: fmt.Sprintf("%d; %d", leftC, leftN), Target: "0; 0"},
	}
	benchdoc.Print(100, rows)
	if failures > 0 {
		return fmt.Errorf("%d failure(s)", failures)
	}
	intro := fmt.Sprintf("By `%s` against the Docker Engine on this machine, %s; image: the local busybox test image; one user (one control daemon), %d project dirs.", command, benchdoc.Machine(), n)
	notes := "Each sandbox is an `up -d` of its own project dir whose manifest has one sidecar daemon (`sleep`), so each holds\n" +
		"a primary container with the supervisor as PID 1 and its daemon, on the shared network (sharded at\n" +
		"`runtime.shared_network_max` endpoints, [scaling.md](scaling.md)). The daemon makes at most\n" +
		"`runtime.creates_per_engine` (8) at once and queues the rest. Each exec prints its index; `ps` is the CLI's\n" +
		"whole run (process start, the daemon's answer, the table), the API row the daemon's answer alone. RSS is the\n" +
		"daemon's with all of them alive; the fds are its open descriptors then."
	return benchdoc.Write(doc, "Many alive at once", intro, rows, notes)
}
