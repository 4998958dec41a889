// Command benchpause measures pausing a sandbox (issue 42): an `up -d`
// sandbox of the busybox test image with a daemon that counts in memory and a
// service, paused and unpaused through the API (the Go client) and by the
// CLI, each 20 times, the medians against the targets; then what a paused
// sandbox costs (its memory as the Engine counts it, its CPU over 2 s) and
// that the daemon went on from its counter with the same PID. It records
// docs/benchmarks.md "## Pause and unpause". scripts/bench-pause.sh runs it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/client"
)

// manifest: a counter kept in a shell's memory, written out every 50 ms, and
// a service beside it.
func manifest(image string) string {
	return fmt.Sprintf(`[sandbox]
image = %[1]q

[daemons.counter]
command = ["sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.05; done"]
timeout = 2

[services.svc]
image = %[1]q
command = ["sh", "-c", "exec sleep 100000"]
`, image)
}

func main() {
	o := benchdoc.Flags("scripts/bench-pause.sh")
	n := flag.Int("n", 20, "pauses and unpauses of each kind")
	flag.Parse()
	benchdoc.Exit("benchpause", bench(o, *n))
}

func bench(o *benchdoc.Options, n int) error {
	ctx := context.Background()
	b, err := benchdoc.OpenBusybox(ctx, o.Airlock, "airlock-bench-pause-", manifest)
	if err != nil {
		return err
	}
	defer b.Close()
	d, out, err := b.Timed(b.Airlock, "up", "-d")
	if err != nil {
		return fmt.Errorf("up -d: %v\n%s", err, out)
	}
	id := strings.TrimSpace(out)
	defer func() { _ = b.Command(b.Airlock, "rm", "-f", id).Run() }()
	c := b.Client()
	fmt.Printf("up -d: %v, sandbox %s\n", d.Round(time.Millisecond), id)
	time.Sleep(time.Second)

	var apiPause, apiUnpause, cliPause, cliUnpause []time.Duration
	for range n {
		start := time.Now()
		if _, err := c.Pause(ctx, id); err != nil {
			return err
		}
		apiPause = append(apiPause, time.Since(start))
		start = time.Now()
		if _, err := c.Unpause(ctx, id); err != nil {
			return err
		}
		apiUnpause = append(apiUnpause, time.Since(start))
		d, out, err := b.Timed(b.Airlock, "pause", id)
		if err != nil {
			return fmt.Errorf("airlock pause: %v\n%s", err, out)
		}
		cliPause = append(cliPause, d)
		if d, out, err = b.Timed(b.Airlock, "unpause", id); err != nil {
			return fmt.Errorf("airlock unpause: %v\n%s", err, out)
		}
		cliUnpause = append(cliUnpause, d)
	}
	freezeMS, thawMS, err := engineTimes(ctx, b.Engine, id, n)
	if err != nil {
		return err
	}

	// What a paused sandbox costs, and its daemon's state across the pause.
	pid, err := counterPID(ctx, c, id)
	if err != nil {
		return err
	}
	runCPU, runMem, err := usage(ctx, b.Engine, id, 2*time.Second)
	if err != nil {
		return err
	}
	if _, err := c.Pause(ctx, id); err != nil {
		return err
	}
	before, err := counter(ctx, c, id)
	if err != nil {
		return err
	}
	pausedCPU, pausedMem, err := usage(ctx, b.Engine, id, 2*time.Second)
	if err != nil {
		return err
	}
	still, err := counter(ctx, c, id)
	if err != nil {
		return err
	}
	if _, err := c.Unpause(ctx, id); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	after, err := counter(ctx, c, id)
	if err != nil {
		return err
	}
	pid2, err := counterPID(ctx, c, id)
	if err != nil {
		return err
	}
	kept := "yes"
	if still != before || after <= before || pid2 != pid {
		kept = fmt.Sprintf("NO: %d, %d while paused, %d after; pid %d then %d", before, still, after, pid, pid2)
	}

	rows := []benchdoc.Row{
		{Measure: fmt.Sprintf("`POST …/pause` through the Go client: primary and one service frozen (median of %d)", n), Result: benchdoc.MS(benchdoc.Median(apiPause)), Target: "≤ 100 ms"},
		{Measure: "`POST …/unpause` through the Go client (median)", Result: benchdoc.MS(benchdoc.Median(apiUnpause)), Target: "≤ 100 ms"},
		{Measure: "`airlock pause ID` (the whole command; median)", Result: benchdoc.MS(benchdoc.Median(cliPause)), Target: "–"},
		{Measure: "`airlock unpause ID` (median)", Result: benchdoc.MS(benchdoc.Median(cliUnpause)), Target: "–"},
		{Measure: "the Engine's pause of the primary alone, one API call (median): the floor", Result: freezeMS, Target: "–"},
		{Measure: "the Engine's unpause of the primary alone (median)", Result: thawMS, Target: "–"},
		{Measure: "CPU of the sandbox's primary over 2 s, running (the counter daemon)", Result: runCPU, Target: "–"},
		{Measure: "CPU of the sandbox's primary over 2 s, paused", Result: pausedCPU, Target: "0"},
		{Measure: "memory of the primary, running → paused (the Engine's count)", Result: runMem + " → " + pausedMem, Target: "kept"},
		{Measure: "the daemon's counter frozen while paused, then going on with the same PID", Result: kept, Target: "yes"},
	}
	benchdoc.Print(80, rows)
	if kept != "yes" {
		return errors.New("the daemon's state was not kept across the pause: " + kept)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	intro := fmt.Sprintf("By `%s` against the Docker Engine on this machine, %s, load average %s at the start; image: the local busybox test image; an `up -d` sandbox with one daemon and one service.",
		o.Command, benchdoc.Machine(), strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "))
	notes := "A pause is the daemon's round trip: the sandbox's containers listed, the primary and each service frozen side by side " +
		"(the Engine's container pause, the cgroup freezer), `sandbox.paused` written to the store. `airlock pause` adds the CLI's own start " +
		"and its connection to the daemon. The figures move with the machine's load (the Engine's own pause is some 10 ms on an idle machine, " +
		"several times that when the two cores are busy); the daemon adds a few milliseconds to it. While paused, the sandbox keeps its memory (the same count as running: nothing is swapped or " +
		"written out) and uses no CPU; its ports stay bound."
	return benchdoc.Write(o.Doc, "Pause and unpause", intro, rows, notes)
}

// counter reads the counter daemon's /tmp/counter.
func counter(ctx context.Context, c *client.Client, id string) (int, error) {
	rc, err := c.ReadFile(ctx, id, "/tmp/counter")
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// counterPID is the PID of the counter daemon's last start, and an error
// when it started more than once.
func counterPID(ctx context.Context, c *client.Client, id string) (int, error) {
	evs, err := c.History(ctx, id, 0)
	if err != nil {
		return 0, err
	}
	pid, starts := 0, 0
	for _, ev := range evs {
		if ev.Kind == "daemon.started" && ev.Daemon == "counter" {
			pid, starts = ev.PID, starts+1
		}
	}
	if starts != 1 {
		return 0, fmt.Errorf("the counter daemon started %d times", starts)
	}
	return pid, nil
}

// primary is the ID of sandbox id's primary container.
func primary(ctx context.Context, eng *dockerclient.Client, id string) (string, error) {
	list, err := eng.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", "dev.airlock.sandbox="+id), filters.Arg("label", "dev.airlock.role=primary"))})
	if err != nil || len(list) != 1 {
		return "", fmt.Errorf("the primary of %s: %v (%d found)", id, err, len(list))
	}
	return list[0].ID, nil
}

// usage is the CPU the primary used over d (ms, and the share of one CPU)
// and its memory at the end, as the Engine's stats count them.
func usage(ctx context.Context, eng *dockerclient.Client, id string, d time.Duration) (cpu, mem string, err error) {
	cid, err := primary(ctx, eng, id)
	if err != nil {
		return "", "", err
	}
	stat := func() (container.StatsResponse, error) {
		var s container.StatsResponse
		r, err := eng.ContainerStatsOneShot(ctx, cid)
		if err != nil {
			return s, err
		}
		defer r.Body.Close()
		return s, json.NewDecoder(r.Body).Decode(&s)
	}
	a, err := stat()
	if err != nil {
		return "", "", err
	}
	time.Sleep(d)
	z, err := stat()
	if err != nil {
		return "", "", err
	}
	used := time.Duration(z.CPUStats.CPUUsage.TotalUsage - a.CPUStats.CPUUsage.TotalUsage)
	cpu = fmt.Sprintf("%.1f ms (%.2f %% of a CPU)", float64(used)/1e6, 100*float64(used)/float64(d))
	mem = fmt.Sprintf("%.1f MiB", float64(z.MemoryStats.Usage)/(1<<20))
	return cpu, mem, nil
}

// engineTimes are the medians of the Engine's pause and unpause of the primary
// alone, each one API call: the floor under the daemon's.
func engineTimes(ctx context.Context, eng *dockerclient.Client, id string, n int) (freeze, thaw string, err error) {
	cid, err := primary(ctx, eng, id)
	if err != nil {
		return "", "", err
	}
	var fs, ts []time.Duration
	for range n {
		start := time.Now()
		if err := eng.ContainerPause(ctx, cid); err != nil {
			return "", "", err
		}
		mid := time.Now()
		if err := eng.ContainerUnpause(ctx, cid); err != nil {
			return "", "", err
		}
		fs, ts = append(fs, mid.Sub(start)), append(ts, time.Since(mid))
		// Apart: Engine 20.10 takes the paused flag from containerd's
		// events too, and a late one makes the next call fail for a moment.
		time.Sleep(50 * time.Millisecond)
	}
	return benchdoc.MS(benchdoc.Median(fs)), benchdoc.MS(benchdoc.Median(ts)), nil
}
