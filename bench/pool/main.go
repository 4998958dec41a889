// Command benchpool measures airlock's warm pool (docs/pool.md) against the
// docker CLI in the same run, on the local busybox image: a warm `airlock run
// -- true` (a parked sandbox claimed) and a cold one of a manifest whose pool
// is empty against `docker run --rm IMAGE true`, interleaved; 20 concurrent
// runs against a pool of 4; and what one parked sandbox costs while idle. It
// records docs/benchmarks.md "## Warm pool". scripts/bench-pool.sh runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/bench/benchdoc"
)

func main() {
	o := benchdoc.Flags("scripts/bench-pool.sh")
	runs := flag.Int("runs", 20, "runs of each command")
	flag.Parse()
	benchdoc.Exit("benchpool", bench(o.Airlock, *runs, o.Doc, o.Command))
}

func bench(airlock string, runs int, doc, command string) error {
	ctx := context.Background()
	b, err := benchdoc.OpenBusybox(ctx, airlock, "airlock-bench-pool-", func(image string) string {
		return fmt.Sprintf("[sandbox]\nimage = %q\n[sandbox.pool]\nsize = 2\n", image)
	})
	if err != nil {
		return err
	}
	defer b.Close()
	airlock, cli, image, p := b.Airlock, b.Engine, b.Image, b.Project
	c := p.Client()
	timed := func(name string, args ...string) (time.Duration, error) {
		d, _, err := p.Timed(name, args...)
		return d, err
	}
	// Warm up both paths (the supervisor volume, the daemon, the image).
	if _, err := timed(airlock, "pool", "warm"); err != nil {
		return err
	}
	if _, err := timed("docker", "run", "--rm", image, "true"); err != nil {
		return err
	}
	// Between samples: the last run's removal done and the pool full again
	// (a claim is followed by a refill), untimed.
	settle := func(size int) error { return benchdoc.PoolSettled(ctx, cli, c, p.Dir, size) }
	if err := settle(2); err != nil {
		return err
	}
	var docker, warm, cold benchdoc.Timings
	hits0 := benchdoc.PoolOf(ctx, c, p.Dir).Hits
	for i := 0; i < runs; i++ {
		if err := docker.Add(timed("docker", "run", "--rm", image, "true")); err != nil {
			return err
		}
		if err := warm.Add(timed(airlock, "run", "--", "true")); err != nil {
			return err
		}
		if err := settle(2); err != nil {
			return err
		}
		// Cold with a pool configured but empty: drained first (untimed).
		if _, err := timed(airlock, "pool", "drain"); err != nil {
			return err
		}
		if err := cold.Add(timed(airlock, "run", "--", "true")); err != nil {
			return err
		}
		if err := settle(2); err != nil {
			return err
		}
	}
	pl := benchdoc.PoolOf(ctx, c, p.Dir)
	hits := pl.Hits - hits0

	// 20 concurrent runs against a pool of 4.
	if _, err := timed(airlock, "pool", "warm", "--size", "4"); err != nil {
		return err
	}
	if err := settle(4); err != nil {
		return err
	}
	parked := map[string]bool{}
	for _, m := range benchdoc.PoolOf(ctx, c, p.Dir).Sandboxes {
		parked[m.ID] = true
	}
	const burst = 20
	outs := make([]string, burst)
	errs := make([]error, burst)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := p.Command(airlock, "run", "--", "sh", "-c", fmt.Sprintf("hostname; exit %d", i%7)).Output()
			outs[i] = strings.TrimSpace(string(out))
			if err != nil && !(i%7 != 0 && benchdoc.ExitCode(err) == i%7) {
				errs[i] = fmt.Errorf("run %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	burstTook := time.Since(start)
	correct, warmBurst := 0, 0
	distinct := map[string]bool{}
	for i := range burst {
		if errs[i] == nil && outs[i] != "" {
			correct++
		}
		distinct[outs[i]] = true
		if parked[outs[i]] {
			warmBurst++
		}
	}

	// The idle cost of one parked sandbox.
	if _, err := timed(airlock, "pool", "drain"); err != nil {
		return err
	}
	if _, err := timed(airlock, "pool", "warm", "--size", "1"); err != nil {
		return err
	}
	mem, disk, err := idleCost(ctx, cli, p.Dir)
	if err != nil {
		return err
	}
	if _, err := timed(airlock, "pool", "drain"); err != nil {
		return err
	}

	d, w, cl := benchdoc.Median(docker), benchdoc.Median(warm), benchdoc.Median(cold)
	dp95, wp95 := p95(docker), p95(warm)
	rows := []benchdoc.Row{
		{Measure: fmt.Sprintf("`docker run --rm IMAGE true` (median of %d; p95)", runs), Result: benchdoc.MS(d) + "; " + benchdoc.MS(dp95)},
		{Measure: "warm `airlock run -- true`, a parked sandbox claimed (median; p95)", Result: benchdoc.MS(w) + "; " + benchdoc.MS(wp95)},
		{Measure: "warm ratio airlock / docker, p50", Result: benchdoc.Ratio(w, d), Target: "≤ 0.25×"},
		{Measure: "warm ratio airlock / docker, p95", Result: benchdoc.Ratio(wp95, dp95), Target: "≤ 0.4×"},
		{Measure: fmt.Sprintf("warm runs that got a parked sandbox (hits of %d)", runs), Result: fmt.Sprint(hits)},
		{Measure: "cold `airlock run -- true` with a pool configured but empty (median)", Result: benchdoc.MS(cl)},
		{Measure: "cold ratio airlock / docker", Result: benchdoc.Ratio(cl, d), Target: "≤ 1.10×"},
		{Measure: fmt.Sprintf("%d concurrent runs, pool of 4: right exit code and output / distinct sandboxes / warm", burst), Result: fmt.Sprintf("%d / %d / %d in %s", correct, len(distinct), warmBurst, benchdoc.MS(burstTook)), Target: fmt.Sprintf("%d / %d / 4", burst, burst)},
		{Measure: "one parked sandbox, idle: memory of its processes (cgroup)", Result: mem},
		{Measure: "one parked sandbox, idle: disk (container's writable layer)", Result: disk},
	}
	benchdoc.Print(70, rows)
	intro := fmt.Sprintf("By `%s` against the Docker Engine on this machine, %s; image: the local busybox test image; manifest: that image with `[sandbox.pool] size = 2`; runs interleaved.", command, benchdoc.Machine())
	notes := "Warm: the pool holds 2 parked sandboxes before each sample (each sample waits, untimed, for the last run's\n" +
		"removal and the pool's refill: a loop of runs at its own pace). Cold: the pool is drained first (untimed), so the\n" +
		"run misses (empty) and starts cold, and its pool refills after it. A warm run still loads the manifest, checks\n" +
		"its layers, asks the daemon to prepare (the image's ID is checked at every claim: tags move), records the\n" +
		"sandbox's events and attaches to it; the claim itself is one line written on the attached stdin (no exec).\n" +
		"The burst: 20 `airlock run` at once against a pool warmed to 4; every run must give its own exit code and\n" +
		"its own sandbox (hostname); warm counts those served by the 4 parked ones (a refill that finished during\n" +
		"the burst may serve more). Idle cost: `docker stats` memory of the parked primary (the supervisor waiting),\n" +
		"and its writable layer (`docker ps -s`)."
	return benchdoc.Write(doc, "Warm pool", intro, rows, notes)
}

// idleCost is the memory and disk of the project's one parked sandbox.
func idleCost(ctx context.Context, cli dockerclient.APIClient, project string) (mem, disk string, err error) {
	list, err := cli.ContainerList(ctx, container.ListOptions{Size: true, Filters: filters.NewArgs(
		filters.Arg("label", "dev.airlock.project="+project), filters.Arg("label", "dev.airlock.pool"), filters.Arg("label", "dev.airlock.role=primary"))})
	if err != nil || len(list) == 0 {
		return "", "", fmt.Errorf("no parked sandbox to measure: %v", err)
	}
	st, err := cli.ContainerStatsOneShot(ctx, list[0].ID)
	if err != nil {
		return "", "", err
	}
	defer st.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(st.Body).Decode(&s); err != nil {
		return "", "", err
	}
	used := s.MemoryStats.Usage
	if cache, ok := s.MemoryStats.Stats["total_inactive_file"]; ok && cache < used {
		used -= cache
	} else if cache, ok := s.MemoryStats.Stats["inactive_file"]; ok && cache < used {
		used -= cache
	}
	return fmt.Sprintf("%.1f MiB", float64(used)/(1<<20)), fmt.Sprintf("%.1f KiB", float64(list[0].SizeRw)/1024), nil
}

// p95 is the 95th percentile of ts (nearest rank).
func p95(ts benchdoc.Timings) time.Duration {
	s := slices.Clone([]time.Duration(ts))
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	i := (len(s)*95 + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}
