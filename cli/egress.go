package cli

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/termsafe"
)

// summaryDestinations is how many denied destinations the summary names one by
// one; the rest are folded into one line.
const summaryDestinations = 10

// egressSummary prints, from a sandbox's events, how often each destination was
// denied by its egress rules: `airlock: egress denied 3× to example.com:443`,
// the most denied first; past summaryDestinations, one line for the rest, and
// one for the denials past the daemon's cap of recorded destinations (the
// egress.denied event with extra "overflow").
func (a *app) egressSummary(ctx context.Context, c *client.Client, id string) {
	if a.opts.quiet {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	evs, _ := c.History(ctx, id, 0)
	counts := map[string]int{}
	other, otherLimit := 0, ""
	for _, ev := range evs {
		if ev.Kind != "egress.denied" {
			continue
		}
		n, _ := strconv.Atoi(ev.Extra["count"])
		if ev.Extra["overflow"] != "" {
			other, otherLimit = max(other, n), ev.Extra["limit"]
			continue
		}
		dest := ev.Extra["host"] + ":" + ev.Extra["port"]
		counts[dest] = max(counts[dest], n)
	}
	dests := slices.SortedFunc(maps.Keys(counts), func(x, y string) int {
		return cmp.Or(cmp.Compare(counts[y], counts[x]), cmp.Compare(x, y))
	})
	for i, d := range dests {
		if i == summaryDestinations && len(dests) > summaryDestinations+1 {
			rest := 0
			for _, d := range dests[i:] {
				rest += counts[d]
			}
			fmt.Fprintf(a.stderr, "airlock: egress denied %d× to %d more destinations (airlock events %s lists them)\n", rest, len(dests)-i, id)
			break
		}
		fmt.Fprintf(a.stderr, "airlock: egress denied %d× to %s\n", counts[d], termsafe.Line(d))
	}
	if other > 0 {
		fmt.Fprintf(a.stderr, "airlock: egress denied %d× to other destinations (past the first %s, destinations are counted, not recorded)\n", other, termsafe.Line(otherLimit))
	}
}

// egressCountedAtStop reports whether the daemon recorded sandbox id's egress
// denials as it stopped (extra egress_counted of sandbox.stopped).
func egressCountedAtStop(ctx context.Context, c *client.Client, id string) bool {
	evs, err := c.History(ctx, id, 0)
	if err != nil {
		return false
	}
	for _, ev := range evs {
		if ev.Kind == "sandbox.stopped" && ev.Extra["egress_counted"] == "true" {
			return true
		}
	}
	return false
}
