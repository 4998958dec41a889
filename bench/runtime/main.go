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
	airlock, cli, image, p := b.Airlock, b.Engine, b.Image, b.Project
	project, env := p.Dir, p.Env
	timed := func(name string, args ...string) (time.Duration, error) {
		d, _, err := p.Timed(name, args...)
		return d, err
	}
	// Warm up both paths (the supervisor volume is filled once per binary).
	if _, err := timed(airlock, "run", "--", "true"); err != nil {
		return err
	}
	if _, err := timed("docker", "run", "--rm", image, "true"); err != nil {
		return err
	}
	// A remote Engine: the CLI points at it with DOCKER_HOST (one daemon serves both).
	var timedRemote func() (time.Duration, error)
	var remoteCli dockerclient.APIClient
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
		remoteHost := re.Host
		remoteCli = re.Client
		if _, err := testenv.BuildBusyboxImage(ctx, re.Client); err != nil {
			return fmt.Errorf("on %s: %w", remoteHost, err)
		}
		timedRemote = func() (time.Duration, error) {
			c := p.Command(airlock, "run", "--", "true")
			c.Env = append(append([]string(nil), env...), "DOCKER_HOST="+remoteHost)
			d, _, err := benchdoc.Timed(c)
			if err != nil {
				return 0, fmt.Errorf("DOCKER_HOST=%s %w", remoteHost, err)
			}
			return d, nil
		}
		if _, err := timedRemote(); err != nil {
			return err
		}
	}
	// airlock run returns once the daemon took the removal over; let it finish
	// (untimed) before the next command, so that no run pays for the last one's.
	settle := func(engine dockerclient.APIClient) error { return benchdoc.Settled(ctx, engine, project) }
	// The same run with egress rules (an internal network and a proxy container).
	egressProject, err := p.AddDir("egress-project", map[string]string{"sandbox.toml": fmt.Sprintf("[sandbox]\nimage = %q\n[sandbox.egress]\nallow = [\"example.org\"]\n", image)})
	if err != nil {
		return err
	}
	timedEgress := func() (time.Duration, error) {
		c := p.Command(airlock, "run", "--", "true")
		c.Dir = egressProject
		d, _, err := benchdoc.Timed(c)
		if err != nil {
			return 0, fmt.Errorf("with egress rules: %w", err)
		}
		return d, nil
	}
	settleEgress := func() error { return benchdoc.Settled(ctx, cli, egressProject) }
	if _, err := timedEgress(); err != nil {
		return err
	}
	if err := settleEgress(); err != nil {
		return err
	}
	var dockerRun, dockerShared, airlockRun, remoteRun, egressRun benchdoc.Timings
	var runIDs []string
	for i := 0; i < runs; i++ {
		if err := dockerRun.Add(timed("docker", "run", "--rm", image, "true")); err != nil {
			return err
		}
		// The same docker run on the network airlock's sandbox joins (made by the
		// warm-up run): what the Engine charges for it, apart from airlock's own work.
		if err := dockerShared.Add(timed("docker", "run", "--rm", "--network", docker.SharedNetwork, image, "true")); err != nil {
			return err
		}
		runID := fmt.Sprintf("bench-run-%d-%d", os.Getpid(), i)
		if err := airlockRun.Add(timed(airlock, "run", "--id", runID, "--", "true")); err != nil {
			return err
		}
		if err := settle(cli); err != nil {
			return err
		}
		runIDs = append(runIDs, runID)
		if err := egressRun.Add(timedEgress()); err != nil {
			return err
		}
		if err := settleEgress(); err != nil {
			return err
		}
		if timedRemote != nil {
			if err := remoteRun.Add(timedRemote()); err != nil {
				return err
			}
			if err := settle(remoteCli); err != nil {
				return err
			}
		}
	}

	// Output throughput: 1 GiB through run's stdout against docker run's, into
	// a pipe here, twice interleaved.
	var dockerBps, airlockBps []float64
	for i := 0; i < 2; i++ {
		bps, err := throughput(p.Command("docker", "run", "--rm", image, "head", "-c", fmt.Sprint(streamBytes), "/dev/zero"))
		if err != nil {
			return err
		}
		dockerBps = append(dockerBps, bps)
		if bps, err = throughput(p.Command(airlock, "run", "-q", "--", "head", "-c", fmt.Sprint(streamBytes), "/dev/zero")); err != nil {
			return err
		}
		airlockBps = append(airlockBps, bps)
		if err := settle(cli); err != nil {
			return err
		}
	}

	out, err := p.Command(airlock, "up", "-d").Output()
	if err != nil {
		return fmt.Errorf("airlock up -d: %v", err)
	}
	id := strings.TrimSpace(string(out))
	defer func() {
		_ = p.Command(airlock, "down").Run()
	}()
	var dockerExec, airlockExec benchdoc.Timings
	for i := 0; i < runs; i++ {
		if err := dockerExec.Add(timed("docker", "exec", "airlock-"+id, "true")); err != nil {
			return err
		}
		if err := airlockExec.Add(timed(airlock, "exec", "--", "true")); err != nil {
			return err
		}
	}

	// Keystroke echo on an interactive shell: airlock's attached exec (what
	// up's shell is) against docker exec -it, 50 keys each, twice interleaved.
	var dockerEcho, airlockEcho benchdoc.Timings
	for i := 0; i < 2; i++ {
		if err := dockerEcho.Add(echoLatency(p.Command("docker", "exec", "-it", "airlock-"+id, "sh"), 50)); err != nil {
			return err
		}
		if err := airlockEcho.Add(echoLatency(p.Command(airlock, "exec", "--", "sh"), 50)); err != nil {
			return err
		}
	}
	// Control-daemon throughput: concurrent GET /v1/sandboxes/{id} for 2 s.
	c := p.Client()
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
	requests := float64(n.Load()) / 2

	steps, order := breakdowns(ctx, c, runIDs)
	dr, ar, de, ae := benchdoc.Median(dockerRun), benchdoc.Median(airlockRun), benchdoc.Median(dockerExec), benchdoc.Median(airlockExec)
	rows := []benchdoc.Row{
		{Measure: "`docker run --rm IMAGE true` (median of " + fmt.Sprint(runs) + ")", Result: benchdoc.MS(dr)},
		{Measure: "`airlock run -- true` (median)", Result: benchdoc.MS(ar)},
		{Measure: "run ratio airlock / docker", Result: benchdoc.Ratio(ar, dr), Target: "≤ 1.10×"},
		{Measure: "`docker run --rm --network " + docker.SharedNetwork + " IMAGE true`: the network airlock's sandbox joins (median)", Result: benchdoc.MS(benchdoc.Median(dockerShared))},
		{Measure: "run ratio airlock / docker on that network", Result: benchdoc.Ratio(ar, benchdoc.Median(dockerShared))},
		{Measure: "`docker exec CONTAINER true` (median)", Result: benchdoc.MS(de)},
		{Measure: "`airlock exec -- true` (median)", Result: benchdoc.MS(ae)},
		{Measure: "exec ratio airlock / docker", Result: benchdoc.Ratio(ae, de), Target: "≤ 1.10×"},
		{Measure: "keystroke echo, `docker exec -it CONTAINER sh` (median of 100)", Result: fmt.Sprintf("%.2f ms", float64(benchdoc.Median(dockerEcho))/1e6)},
		{Measure: "keystroke echo, `airlock exec -- sh` on a terminal (up's shell; median)", Result: fmt.Sprintf("%.2f ms", float64(benchdoc.Median(airlockEcho))/1e6)},
		{Measure: "echo ratio airlock / docker", Result: benchdoc.Ratio(benchdoc.Median(airlockEcho), benchdoc.Median(dockerEcho)), Target: "≤ 1.00×"},
		{Measure: "1 GiB on stdout, `docker run --rm IMAGE head -c 1G /dev/zero` into a pipe (mean of 2)", Result: mibps(dockerBps)},
		{Measure: "1 GiB on stdout, `airlock run` into a pipe (mean of 2)", Result: mibps(airlockBps)},
		{Measure: "throughput ratio airlock / docker", Result: fmt.Sprintf("%.2f×", mean(airlockBps)/mean(dockerBps)), Target: "≥ 0.80×"},
		{Measure: "control daemon: `GET /v1/sandboxes/{id}`, 8 concurrent clients", Result: fmt.Sprintf("%.0f requests/s", requests)},
		{Measure: "`airlock run -- true` with `[sandbox.egress]` (internal network + egress proxy, median)", Result: fmt.Sprintf("%s (%.2f× without)", benchdoc.MS(benchdoc.Median(egressRun)), float64(benchdoc.Median(egressRun))/float64(ar))},
	}
	if len(remoteRun) > 0 {
		rr := benchdoc.Median(remoteRun)
		rows = append(rows,
			benchdoc.Row{Measure: "`airlock run -- true` on the stand-in remote Engine (DOCKER_HOST=tcp://127.0.0.1:…, project copied in, median)", Result: benchdoc.MS(rr)},
			benchdoc.Row{Measure: "remote run ratio remote / local `airlock run`", Result: benchdoc.Ratio(rr, ar)})
	}
	for _, name := range order {
		rows = append(rows, benchdoc.Row{Measure: "`airlock run -- true` step: " + name + " (median, daemon's clock)", Result: benchdoc.MS(benchdoc.Median(steps[name]))})
	}
	benchdoc.Print(50, rows)
	intro := fmt.Sprintf("By `%s` against the Docker Engine on this machine, %s; image: the local busybox test image; runs interleaved.", command, benchdoc.Machine())
	notes := "`airlock run` does more than `docker run`: it resolves the manifest, goes through the control daemon,\n" +
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
	return benchdoc.Write(doc, "Runtime", intro, rows, notes)
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
