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
	"github.com/airlock-dev/airlock/client"
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
	r := &poolBench{ctx: ctx, airlock: b.Airlock, cli: b.Engine, image: b.Image, p: b.Project, runs: runs}
	r.c = r.p.Client()
	if err := r.warmUp(); err != nil {
		return err
	}
	if err := r.sample(); err != nil {
		return err
	}
	if err := r.sampleSteps(max(r.runs/2, 5)); err != nil {
		return err
	}
	if err := r.runBurst(); err != nil {
		return err
	}
	if err := r.measureIdle(); err != nil {
		return err
	}
	rows := r.rows()
	benchdoc.Print(70, rows)
	intro := fmt.Sprintf("By `%s` against the Docker Engine on this machine, %s; image: the local busybox test image; manifest: that image with `[sandbox.pool] size = 2`; runs interleaved.", command, benchdoc.Machine())
	return benchdoc.Write(doc, "Warm pool", intro, rows, notes)
}

// notes is what the section says under its table.
const notes = "Warm: the pool holds 2 parked sandboxes before each sample (each sample waits, untimed, for the last run's\n" +
	"removal and the pool's refill: a loop of runs at its own pace). Cold: the pool is drained first (untimed), so the\n" +
	"run misses (empty) and starts cold, and its pool refills after it. A warm run still loads the manifest, checks\n" +
	"its layers, asks the daemon to prepare (the image's ID is checked at every claim: tags move), records the\n" +
	"sandbox's events and attaches to it; the claim itself is one line written on the attached stdin (no exec).\n" +
	"The burst: 20 `airlock run` at once against a pool warmed to 4; every run must give its own exit code and\n" +
	"its own sandbox (hostname); warm counts those served by the 4 parked ones (a refill that finished during\n" +
	"the burst may serve more). Idle cost: `docker stats` memory of the parked primary (the supervisor waiting),\n" +
	"and its writable layer (`docker ps -s`).\n" +
	"Steps: warm runs with `--log-level debug` (untimed), which end with the command's own steps, each timed from\n" +
	"when its packages began to initialise (`start → init` is the rest of their initialisation; the process's exec and\n" +
	"the Go runtime's start before it, and its exit after `end`, are not in them), and the daemon's breakdown of the\n" +
	"sandbox's events on its own clock."

// burst is the number of concurrent runs against a pool of 4.
const burst = 20

// poolBench is one run of the benchmark: the project whose pool it times, and
// the figures taken so far.
type poolBench struct {
	ctx     context.Context
	airlock string
	cli     dockerclient.APIClient
	image   string
	p       *benchdoc.Project
	c       *client.Client // of the project's control daemon
	runs    int

	docker, warm, cold benchdoc.Timings
	hits               int // the warm runs that got a parked sandbox
	// The burst: its wall time, the runs with the right exit code and
	// output, the sandboxes they got and those that were parked.
	burstTook                    time.Duration
	correct, distinct, warmBurst int
	mem, disk                    string // the idle cost of one parked sandbox
	steps                        warmSteps
}

// settle waits, untimed, between samples: the last run's removal done and the
// pool full again (a claim is followed by a refill).
func (r *poolBench) settle(size int) error {
	return benchdoc.PoolSettled(r.ctx, r.cli, r.c, r.p.Dir, size)
}

// warmUp runs both paths once (the supervisor volume, the daemon, the image).
func (r *poolBench) warmUp() error {
	if _, err := r.p.Time(r.airlock, "pool", "warm"); err != nil {
		return err
	}
	if _, err := r.p.Time("docker", "run", "--rm", r.image, "true"); err != nil {
		return err
	}
	return r.settle(2)
}

// sample times docker run, a warm airlock run and a cold one (its pool
// drained first, untimed), interleaved, runs times, and counts the pool's hits.
func (r *poolBench) sample() error {
	hits0 := benchdoc.PoolOf(r.ctx, r.c, r.p.Dir).Hits
	for i := 0; i < r.runs; i++ {
		if err := r.docker.Add(r.p.Time("docker", "run", "--rm", r.image, "true")); err != nil {
			return err
		}
		if err := r.warm.Add(r.p.Time(r.airlock, "run", "--", "true")); err != nil {
			return err
		}
		if err := r.settle(2); err != nil {
			return err
		}
		// Cold with a pool configured but empty: drained first (untimed).
		if _, err := r.p.Time(r.airlock, "pool", "drain"); err != nil {
			return err
		}
		if err := r.cold.Add(r.p.Time(r.airlock, "run", "--", "true")); err != nil {
			return err
		}
		if err := r.settle(2); err != nil {
			return err
		}
	}
	pl := benchdoc.PoolOf(r.ctx, r.c, r.p.Dir)
	r.hits = pl.Hits - hits0
	return nil
}

// runBurst starts burst runs at once against a pool of 4, each exiting with
// its own code and printing its sandbox's hostname.
func (r *poolBench) runBurst() error {
	if _, err := r.p.Time(r.airlock, "pool", "warm", "--size", "4"); err != nil {
		return err
	}
	if err := r.settle(4); err != nil {
		return err
	}
	parked := map[string]bool{}
	for _, m := range benchdoc.PoolOf(r.ctx, r.c, r.p.Dir).Sandboxes {
		parked[m.ID] = true
	}
	outs := make([]string, burst)
	errs := make([]error, burst)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := r.p.Command(r.airlock, "run", "--", "sh", "-c", fmt.Sprintf("hostname; exit %d", i%7)).Output()
			outs[i] = strings.TrimSpace(string(out))
			if err != nil && !(i%7 != 0 && benchdoc.ExitCode(err) == i%7) {
				errs[i] = fmt.Errorf("run %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	r.burstTook = time.Since(start)
	distinct := map[string]bool{}
	for i := range burst {
		if errs[i] == nil && outs[i] != "" {
			r.correct++
		}
		distinct[outs[i]] = true
		if parked[outs[i]] {
			r.warmBurst++
		}
	}
	r.distinct = len(distinct)
	return nil
}

// measureIdle takes the idle cost of one parked sandbox.
func (r *poolBench) measureIdle() error {
	if _, err := r.p.Time(r.airlock, "pool", "drain"); err != nil {
		return err
	}
	if _, err := r.p.Time(r.airlock, "pool", "warm", "--size", "1"); err != nil {
		return err
	}
	var err error
	if r.mem, r.disk, err = idleCost(r.ctx, r.cli, r.p.Dir); err != nil {
		return err
	}
	_, err = r.p.Time(r.airlock, "pool", "drain")
	return err
}

// rows are the figures: the samples' medians, p95s and ratios, the burst's
// counts and the idle cost.
func (r *poolBench) rows() []benchdoc.Row {
	d, w, cl := benchdoc.Median(r.docker), benchdoc.Median(r.warm), benchdoc.Median(r.cold)
	dp95, wp95 := p95(r.docker), p95(r.warm)
	rows := []benchdoc.Row{
		{Measure: fmt.Sprintf("`docker run --rm IMAGE true` (median of %d; p95)", r.runs), Result: benchdoc.MS(d) + "; " + benchdoc.MS(dp95)},
		{Measure: "warm `airlock run -- true`, a parked sandbox claimed (median; p95)", Result: benchdoc.MS(w) + "; " + benchdoc.MS(wp95)},
		{Measure: "warm ratio airlock / docker, p50", Result: benchdoc.Ratio(w, d), Target: "≤ 0.12×"},
		{Measure: "warm ratio airlock / docker, p95", Result: benchdoc.Ratio(wp95, dp95), Target: "≤ 0.4×"},
		{Measure: fmt.Sprintf("warm runs that got a parked sandbox (hits of %d)", r.runs), Result: fmt.Sprint(r.hits)},
		{Measure: "cold `airlock run -- true` with a pool configured but empty (median)", Result: benchdoc.MS(cl)},
		{Measure: "cold ratio airlock / docker", Result: benchdoc.Ratio(cl, d), Target: "≤ 1.10×"},
		{Measure: fmt.Sprintf("%d concurrent runs, pool of 4: right exit code and output / distinct sandboxes / warm", burst), Result: fmt.Sprintf("%d / %d / %d in %s", r.correct, r.distinct, r.warmBurst, benchdoc.MS(r.burstTook)), Target: fmt.Sprintf("%d / %d / 4", burst, burst)},
		{Measure: "one parked sandbox, idle: memory of its processes (cgroup)", Result: r.mem},
		{Measure: "one parked sandbox, idle: disk (container's writable layer)", Result: r.disk},
	}
	return append(rows, r.steps.rows()...)
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
