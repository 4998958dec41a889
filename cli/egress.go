package cli

import (
	"context"
	"fmt"
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
	st, err := c.Events(ctx, id, 0, false)
	if err != nil {
		return
	}
	defer st.Close()
	counts := map[string]int{}
	for {
		ev, err := st.Next()
		if err != nil {
			break
		}
		if ev.Kind != "egress.denied" {
			continue
		}
		n, _ := strconv.Atoi(ev.Extra["count"])
		dest := ev.Extra["host"] + ":" + ev.Extra["port"]
		counts[dest] = max(counts[dest], n)
	}
	dests := make([]string, 0, len(counts))
	for d := range counts {
		dests = append(dests, d)
	}
	slices.Sort(dests)
	for _, d := range dests {
		fmt.Fprintf(a.stderr, "airlock: egress denied %d× to %s\n", counts[d], d)
	}
}
