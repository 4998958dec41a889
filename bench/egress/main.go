// Command benchegress measures what egress rules cost a run: `airlock run --
// true` with `[sandbox.egress]` against the same run without, on the local
// busybox image, interleaved pairs, and the median of the pairs' ratios. It
// records them in docs/benchmarks.md under "## Egress". scripts/bench-egress.sh
// runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/client"
)

func main() {
	o := benchdoc.Flags("scripts/bench-egress.sh")
	runs := flag.Int("runs", 10, "interleaved pairs")
	flag.Parse()
	benchdoc.Exit("benchegress", bench(o.Airlock, *runs, o.Doc, o.Command))
}

func bench(airlock string, runs int, doc, command string) error {
	ctx := context.Background()
	b, err := benchdoc.OpenBusybox(ctx, airlock, "airlock-bench-egress-", benchdoc.PlainManifest)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.WarmUp(); err != nil {
		return err
	}
	egressDir, err := b.AddDir("egress-project", map[string]string{"sandbox.toml": fmt.Sprintf("[sandbox]\nimage = %q\n[sandbox.egress]\nallow = [\"example.org\"]\n", b.Image)})
	if err != nil {
		return err
	}
	var plainIDs, egressIDs []string
	timedEgress := func() (time.Duration, error) {
		id := fmt.Sprintf("bench-egress-%d-%d", os.Getpid(), len(egressIDs))
		egressIDs = append(egressIDs, id)
		d, _, err := b.TimedIn(egressDir, b.Airlock, "run", "--id", id, "--", "true")
		if err != nil {
			return 0, fmt.Errorf("with egress rules: %w", err)
		}
		return d, benchdoc.Settled(ctx, b.Engine, egressDir)
	}
	timedPlain := func() (time.Duration, error) {
		id := fmt.Sprintf("bench-plain-%d-%d", os.Getpid(), len(plainIDs))
		plainIDs = append(plainIDs, id)
		d, err := b.Time(b.Airlock, "run", "--id", id, "--", "true")
		if err != nil {
			return 0, err
		}
		return d, benchdoc.Settled(ctx, b.Engine, b.Dir)
	}
	if _, err := timedEgress(); err != nil { // the proxy and its image ready
		return err
	}
	var plain, egress benchdoc.Timings
	var ratios []float64
	for i := 0; i < runs; i++ {
		if err := plain.Add(timedPlain()); err != nil {
			return err
		}
		if err := egress.Add(timedEgress()); err != nil {
			return err
		}
		ratios = append(ratios, float64(egress[i])/float64(plain[i]))
	}
	sort.Float64s(ratios)
	ratio := ratios[len(ratios)/2]
	if len(ratios)%2 == 0 {
		ratio = (ratios[len(ratios)/2-1] + ratios[len(ratios)/2]) / 2
	}
	rows := []benchdoc.Row{
		{Measure: fmt.Sprintf("`airlock run -- true` (median of %d)", runs), Result: benchdoc.MS(benchdoc.Median(plain))},
		{Measure: "`airlock run -- true` with `[sandbox.egress]` (median)", Result: benchdoc.MS(benchdoc.Median(egress))},
		{Measure: "egress ratio with / without (median of the interleaved pairs' ratios)", Result: fmt.Sprintf("%.2f×", ratio), Target: "≤ 1.15×"},
	}
	// The steps of the runs, from their events: where the difference goes.
	c := b.Client()
	for _, step := range steps(ctx, c, egressIDs[1:]) {
		rows = append(rows, benchdoc.Row{Measure: "with egress rules, step " + step.name + " (median)", Result: fmt.Sprintf("%.1f ms", float64(step.d)/1e6)})
	}
	for _, step := range steps(ctx, c, plainIDs) {
		rows = append(rows, benchdoc.Row{Measure: "without, step " + step.name + " (median)", Result: fmt.Sprintf("%.1f ms", float64(step.d)/1e6)})
	}
	benchdoc.Print(60, rows)
	intro := fmt.Sprintf("By `%s` against the Docker Engine on this machine, %s; image: the local busybox test image; pairs interleaved.", command, benchdoc.Machine())
	return benchdoc.Write(doc, "Egress", intro, rows, "The run with egress rules joins an internal network of its own, to which the daemon's shared egress proxy is connected\n(docs/egress.md, Cost); each run waits (untimed) until the last one's removal finished.")
}

type step struct {
	name string
	d    time.Duration
}

// steps are the medians of the runs' steps (client.Breakdown of their events).
func steps(ctx context.Context, c *client.Client, ids []string) []step {
	all := map[string][]time.Duration{}
	var order []string
	for _, id := range ids {
		evs, _ := c.History(ctx, id, 0)
		for _, p := range client.Breakdown(evs) {
			if _, ok := all[p.Name]; !ok {
				order = append(order, p.Name)
			}
			all[p.Name] = append(all[p.Name], p.Duration)
		}
	}
	var out []step
	for _, n := range order {
		out = append(out, step{n, benchdoc.Median(all[n])})
	}
	return out
}
