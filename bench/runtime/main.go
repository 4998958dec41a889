// Command benchruntime measures airlock's sandbox runtime against the docker CLI in
// the same run, on the same locally built busybox image: `airlock run -- true`
// against `docker run --rm IMAGE true`, and `airlock exec -- true` against
// `docker exec CONTAINER true`. It prints medians and ratios and records them in
// docs/benchmarks.md under "## Runtime". scripts/bench-runtime.sh runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dockerclient "github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

func main() {
	o := benchdoc.Flags("scripts/bench-runtime.sh")
	runs := flag.Int("runs", 10, "runs of each command")
	remote := flag.Bool("remote", true, "also time `airlock run -- true` on a stand-in remote Engine (a second dockerd in its own namespaces, over loopback TCP)")
	flag.Parse()
	benchdoc.Exit("benchruntime", bench(o.Airlock, *runs, o.Doc, o.Command, *remote))
}

func bench(airlock string, runs int, doc, command string, remote bool) error {
	ctx := context.Background()
	b, err := benchdoc.OpenBusybox(ctx, airlock, "airlock-bench-", benchdoc.PlainManifest)
	if err != nil {
		return err
	}
	defer b.Close()
	r := &runtimeBench{ctx: ctx, airlock: b.Airlock, cli: b.Engine, image: b.Image, p: b.Project, runs: runs}
	// Warm up both paths (the supervisor volume is filled once per binary).
	if err := b.WarmUp(); err != nil {
		return err
	}
	if remote {
		re, stop, err := testenv.StartRemoteEngineFor(nil)
		if err != nil {
			return err
		}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintln(os.Stderr, "benchruntime:", err)
			}
		}()
		if err := r.useRemote(re); err != nil {
			return err
		}
	}
	if err := r.addEgress(); err != nil {
		return err
	}
	if err := r.sampleRuns(); err != nil {
		return err
	}
	if err := r.sampleThroughput(); err != nil {
		return err
	}
	out, err := r.p.Command(r.airlock, "up", "-d").Output()
	if err != nil {
		return fmt.Errorf("airlock up -d: %v", err)
	}
	id := strings.TrimSpace(string(out))
	defer func() {
		_ = r.p.Command(r.airlock, "down").Run()
	}()
	if err := r.sampleExecs(id); err != nil {
		return err
	}
	if err := r.sampleEcho(id); err != nil {
		return err
	}
	// The control daemon's throughput, then the runs' steps, by one client.
	c := r.p.Client()
	requests := daemonRequests(ctx, c, id)
	steps, order := breakdowns(ctx, c, r.runIDs)
	rows := r.rows(requests, steps, order)
	benchdoc.Print(50, rows)
	intro := fmt.Sprintf("By `%s` against the Docker Engine on this machine, %s; image: the local busybox test image; runs interleaved.", command, benchdoc.Machine())
	return benchdoc.Write(doc, "Runtime", intro, rows, notes)
}

// notes is what the section says under its table.
const notes = "`airlock run` does more than `docker run`: it resolves the manifest, goes through the control daemon,\n" +
	"joins the shared `airlock-shared` network (a user-defined bridge with inter-container communication disabled:\n" +
	"the Engine sets up its embedded DNS in the container for a user-defined network, which costs it 35–70 ms more\n" +
	"than the default bridge `docker run` uses: the row with `--network` measures that apart), injects the\n" +
	"supervisor (a cached volume), passes the spec on its command line and reads the status stream through the\n" +
	"Engine API; the CLI takes the main command's exit code from the Engine's `die` event, which Engine 20.10\n" +
	"sends 50–100 ms before it answers a wait (it answers once it released the container's network), and the\n" +
	"daemon removes the container once it exited (as `docker run --rm`), after the CLI returned.\n" +
	"Each run waits (untimed) until that removal finished before the next command starts. The steps are medians of\n" +
	"`client.Breakdown` over the runs' events. The stand-in remote Engine is a second dockerd in its own mount and\n" +
	"network namespaces, reached over loopback TCP through socat: the project is copied in.\n" +
	"`airlock exec` goes through `airlock supervise exec` inside the sandbox to apply the sandbox's environment,\n" +
	"and is recorded by the control daemon (exec.started / exec.finished). Both go through the control daemon,\n" +
	"which is running (warm) during the measured runs.\n" +
	"Keystroke echo: one character typed at a time on a terminal (a pty here) and timed until the shell's terminal\n" +
	"echoes it, 50 keys twice, interleaved; airlock's path is an attached exec made through the daemon (what `up`'s\n" +
	"shell is), whose Engine stream the daemon hands over to the CLI (docs/api.md, A terminal handed over), so the\n" +
	"keystrokes take the path of `docker exec -it`. Throughput: `head -c 1G /dev/zero` as the main\n" +
	"command, its stdout read here from a pipe; both are bound by the Engine writing the output to the container's\n" +
	"json-file log as it passes it on."

// runtimeBench is one run of the benchmark: the project it times airlock in,
// the Engines, and the samples taken so far.
type runtimeBench struct {
	ctx     context.Context
	airlock string
	cli     dockerclient.APIClient
	image   string
	p       *benchdoc.Project
	runs    int

	// The stand-in remote Engine (nil without one) and a timed run on it.
	remoteCli   dockerclient.APIClient
	timedRemote func() (time.Duration, error)
	// The project dir whose manifest has egress rules.
	egressProject string

	dockerRun, dockerShared, airlockRun, remoteRun, egressRun benchdoc.Timings
	runIDs                                                    []string
	dockerBps, airlockBps                                     []float64
	dockerExec, airlockExec                                   benchdoc.Timings
	dockerEcho, airlockEcho                                   benchdoc.Timings
}

// useRemote builds the image on a remote Engine, to which the CLI points with
// DOCKER_HOST (one daemon serves both), and warms the run up there.
func (r *runtimeBench) useRemote(re *testenv.RemoteEngine) error {
	remoteHost := re.Host
	r.remoteCli = re.Client
	if _, err := testenv.BuildBusyboxImage(r.ctx, re.Client); err != nil {
		return fmt.Errorf("on %s: %w", remoteHost, err)
	}
	r.timedRemote = func() (time.Duration, error) {
		c := r.p.Command(r.airlock, "run", "--", "true")
		c.Env = append(append([]string(nil), r.p.Env...), "DOCKER_HOST="+remoteHost)
		d, _, err := benchdoc.Timed(c)
		if err != nil {
			return 0, fmt.Errorf("DOCKER_HOST=%s %w", remoteHost, err)
		}
		return d, nil
	}
	if _, err := r.timedRemote(); err != nil {
		return err
	}
	return nil
}

// settle lets the last airlock run's removal finish on engine (untimed) before
// the next command: airlock run returns once the daemon took the removal over,
// and no run should pay for the last one's.
func (r *runtimeBench) settle(engine dockerclient.APIClient) error {
	return benchdoc.Settled(r.ctx, engine, r.p.Dir)
}

// addEgress makes a project dir for the same run with egress rules (an
// internal network parked by the daemon, its shared proxy) and warms its run up.
func (r *runtimeBench) addEgress() error {
	var err error
	r.egressProject, err = r.p.AddDir("egress-project", map[string]string{"sandbox.toml": fmt.Sprintf("[sandbox]\nimage = %q\n[sandbox.egress]\nallow = [\"example.org\"]\n", r.image)})
	if err != nil {
		return err
	}
	if _, err := r.timedEgress(); err != nil {
		return err
	}
	return r.settleEgress()
}

// timedEgress times one airlock run with egress rules.
func (r *runtimeBench) timedEgress() (time.Duration, error) {
	c := r.p.Command(r.airlock, "run", "--", "true")
	c.Dir = r.egressProject
	d, _, err := benchdoc.Timed(c)
	if err != nil {
		return 0, fmt.Errorf("with egress rules: %w", err)
	}
	return d, nil
}

func (r *runtimeBench) settleEgress() error { return benchdoc.Settled(r.ctx, r.cli, r.egressProject) }

// sampleRuns times docker run, the same on airlock's network, airlock run,
// with egress rules and on the remote Engine, interleaved, runs times.
func (r *runtimeBench) sampleRuns() error {
	for i := 0; i < r.runs; i++ {
		if err := r.dockerRun.Add(r.p.Time("docker", "run", "--rm", r.image, "true")); err != nil {
			return err
		}
		// The same docker run on the network airlock's sandbox joins (made by the
		// warm-up run): what the Engine charges for it, apart from airlock's own work.
		if err := r.dockerShared.Add(r.p.Time("docker", "run", "--rm", "--network", docker.SharedNetwork, r.image, "true")); err != nil {
			return err
		}
		runID := fmt.Sprintf("bench-run-%d-%d", os.Getpid(), i)
		if err := r.airlockRun.Add(r.p.Time(r.airlock, "run", "--id", runID, "--", "true")); err != nil {
			return err
		}
		if err := r.settle(r.cli); err != nil {
			return err
		}
		r.runIDs = append(r.runIDs, runID)
		if err := r.egressRun.Add(r.timedEgress()); err != nil {
			return err
		}
		if err := r.settleEgress(); err != nil {
			return err
		}
		if r.timedRemote != nil {
			if err := r.remoteRun.Add(r.timedRemote()); err != nil {
				return err
			}
			if err := r.settle(r.remoteCli); err != nil {
				return err
			}
		}
	}
	return nil
}

// sampleThroughput streams 1 GiB through run's stdout against docker run's,
// into a pipe here, twice interleaved.
func (r *runtimeBench) sampleThroughput() error {
	for i := 0; i < 2; i++ {
		bps, err := throughput(r.p.Command("docker", "run", "--rm", r.image, "head", "-c", fmt.Sprint(streamBytes), "/dev/zero"))
		if err != nil {
			return err
		}
		r.dockerBps = append(r.dockerBps, bps)
		if bps, err = throughput(r.p.Command(r.airlock, "run", "-q", "--", "head", "-c", fmt.Sprint(streamBytes), "/dev/zero")); err != nil {
			return err
		}
		r.airlockBps = append(r.airlockBps, bps)
		if err := r.settle(r.cli); err != nil {
			return err
		}
	}
	return nil
}

// sampleExecs times docker exec against airlock exec in the sandbox id (up -d),
// interleaved, runs times.
func (r *runtimeBench) sampleExecs(id string) error {
	for i := 0; i < r.runs; i++ {
		if err := r.dockerExec.Add(r.p.Time("docker", "exec", "airlock-"+id, "true")); err != nil {
			return err
		}
		if err := r.airlockExec.Add(r.p.Time(r.airlock, "exec", "--", "true")); err != nil {
			return err
		}
	}
	return nil
}

// sampleEcho times keystroke echo on an interactive shell: airlock's attached
// exec (what up's shell is) against docker exec -it, 50 keys each, twice
// interleaved.
func (r *runtimeBench) sampleEcho(id string) error {
	for i := 0; i < 2; i++ {
		if err := r.dockerEcho.Add(echoLatency(r.p.Command("docker", "exec", "-it", "airlock-"+id, "sh"), 50)); err != nil {
			return err
		}
		if err := r.airlockEcho.Add(echoLatency(r.p.Command(r.airlock, "exec", "--", "sh"), 50)); err != nil {
			return err
		}
	}
	return nil
}

// daemonRequests is the control daemon's throughput: concurrent
// GET /v1/sandboxes/{id} for 2 s, in requests a second.
func daemonRequests(ctx context.Context, c *client.Client, id string) float64 {
	var n atomic.Int64
	deadline := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := c.Get(ctx, id); err == nil {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / 2
}

// rows are the figures: the samples' medians and ratios, the daemon's
// requests a second and the runs' steps (breakdowns).
func (r *runtimeBench) rows(requests float64, steps map[string][]time.Duration, order []string) []benchdoc.Row {
	dr, ar, de, ae := benchdoc.Median(r.dockerRun), benchdoc.Median(r.airlockRun), benchdoc.Median(r.dockerExec), benchdoc.Median(r.airlockExec)
	rows := []benchdoc.Row{
		{Measure: "`docker run --rm IMAGE true` (median of " + fmt.Sprint(r.runs) + ")", Result: benchdoc.MS(dr)},
		{Measure: "`airlock run -- true` (median)", Result: benchdoc.MS(ar)},
		{Measure: "run ratio airlock / docker", Result: benchdoc.Ratio(ar, dr), Target: "≤ 1.10×"},
		{Measure: "`docker run --rm --network " + docker.SharedNetwork + " IMAGE true`: the network airlock's sandbox joins (median)", Result: benchdoc.MS(benchdoc.Median(r.dockerShared))},
		{Measure: "run ratio airlock / docker on that network", Result: benchdoc.Ratio(ar, benchdoc.Median(r.dockerShared))},
		{Measure: "`docker exec CONTAINER true` (median)", Result: benchdoc.MS(de)},
		{Measure: "`airlock exec -- true` (median)", Result: benchdoc.MS(ae)},
		{Measure: "exec ratio airlock / docker", Result: benchdoc.Ratio(ae, de), Target: "≤ 1.10×"},
		{Measure: "keystroke echo, `docker exec -it CONTAINER sh` (median of 100)", Result: fmt.Sprintf("%.2f ms", float64(benchdoc.Median(r.dockerEcho))/1e6)},
		{Measure: "keystroke echo, `airlock exec -- sh` on a terminal (up's shell; median)", Result: fmt.Sprintf("%.2f ms", float64(benchdoc.Median(r.airlockEcho))/1e6)},
		{Measure: "echo ratio airlock / docker", Result: benchdoc.Ratio(benchdoc.Median(r.airlockEcho), benchdoc.Median(r.dockerEcho)), Target: "≤ 1.00×"},
		{Measure: "1 GiB on stdout, `docker run --rm IMAGE head -c 1G /dev/zero` into a pipe (mean of 2)", Result: mibps(r.dockerBps)},
		{Measure: "1 GiB on stdout, `airlock run` into a pipe (mean of 2)", Result: mibps(r.airlockBps)},
		{Measure: "throughput ratio airlock / docker", Result: fmt.Sprintf("%.2f×", mean(r.airlockBps)/mean(r.dockerBps)), Target: "≥ 0.80×"},
		{Measure: "control daemon: `GET /v1/sandboxes/{id}`, 8 concurrent clients", Result: fmt.Sprintf("%.0f requests/s", requests)},
		{Measure: "`airlock run -- true` with `[sandbox.egress]` (a parked internal network, the daemon's shared egress proxy, median)", Result: fmt.Sprintf("%s (%.2f× without)", benchdoc.MS(benchdoc.Median(r.egressRun)), float64(benchdoc.Median(r.egressRun))/float64(ar))},
	}
	if len(r.remoteRun) > 0 {
		rr := benchdoc.Median(r.remoteRun)
		rows = append(rows,
			benchdoc.Row{Measure: "`airlock run -- true` on the stand-in remote Engine (DOCKER_HOST=tcp://127.0.0.1:…, project copied in, median)", Result: benchdoc.MS(rr)},
			benchdoc.Row{Measure: "remote run ratio remote / local `airlock run`", Result: benchdoc.Ratio(rr, ar)})
	}
	for _, name := range order {
		rows = append(rows, benchdoc.Row{Measure: "`airlock run -- true` step: " + name + " (median, daemon's clock)", Result: benchdoc.MS(benchdoc.Median(steps[name]))})
	}
	return rows
}

func mean(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// mibps is a mean throughput in MiB/s.
func mibps(bps []float64) string { return fmt.Sprintf("%.0f MiB/s", mean(bps)/(1<<20)) }

// breakdowns collects the per-step breakdown (client.Breakdown) of each run, by
// step name, in the order the steps first appear.
func breakdowns(ctx context.Context, c *client.Client, ids []string) (map[string][]time.Duration, []string) {
	steps := map[string][]time.Duration{}
	var order []string
	for _, id := range ids {
		evs, _ := c.History(ctx, id, 0)
		for _, p := range client.Breakdown(evs) {
			if _, ok := steps[p.Name]; !ok {
				order = append(order, p.Name)
			}
			steps[p.Name] = append(steps[p.Name], p.Duration)
		}
	}
	return steps, order
}
