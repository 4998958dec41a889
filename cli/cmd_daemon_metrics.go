package cli

import (
	"context"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// newDaemonMetricsCommand is `airlock daemon metrics`: the daemon's GET
// /metrics, printed as it came (Prometheus' text format, docs/metrics.md).
func newDaemonMetricsCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "metrics",
		Short: "Print the daemon's metrics (Prometheus' text format: creates warm and cold, sandboxes by state, pools, execs, store, process)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			c, err := a.daemonClient(ctx)
			if err != nil {
				return err
			}
			text, err := c.Metrics(ctx)
			if err != nil {
				return apiFailure(err)
			}
			_, err = io.Copy(a.stdout, strings.NewReader(text))
			return err
		},
	}
}
