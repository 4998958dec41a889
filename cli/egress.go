package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// egressSummary prints, from a sandbox's events, how often each destination was
// denied by its egress rules: `airlock: egress denied 3× to example.com:443`.
func (a *app) egressSummary(ctx context.Context, c *client.Client, id string) {
	if a.opts.quiet {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	evs, _ := c.History(ctx, id, 0)
	counts := map[string]int{}
	for _, ev := range evs {
		if ev.Kind != "egress.denied" {
			continue
		}
		n, _ := strconv.Atoi(ev.Extra["count"])
		dest := ev.Extra["host"] + ":" + ev.Extra["port"]
		counts[dest] = max(counts[dest], n)
	}
	for _, d := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(a.stderr, "airlock: egress denied %d× to %s\n", counts[d], d)
	}
}
