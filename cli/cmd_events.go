package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/termsafe"
)

func init() { addCommand(newEventsCommand) }

func newEventsCommand(a *app) *cobra.Command {
	var from uint64
	var follow, asJSON bool
	cmd := &cobra.Command{
		Use:   "events [SANDBOX]",
		Short: "Print a sandbox's ordered event history (default: this project's)",
		Long: "events prints the events of a sandbox after sequence --from (0: all), one a line; -f keeps following\n" +
			"live with no gap or duplicate; --json prints one JSON object a line with sandbox_id, sequence, kind,\n" +
			"time, state and the kind's details.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer cancel()
			c, err := a.daemonClient(ctx)
			if err != nil {
				return err
			}
			// A deleted sandbox's history stays readable until it is purged.
			var id string
			if len(args) == 1 {
				id = args[0]
			} else {
				list, err := a.targets(ctx, c, nil, nil)
				if err != nil {
					return err
				}
				id = list[0].ID
			}
			st, err := c.Events(ctx, id, from, follow)
			if err != nil {
				return apiFailure(err)
			}
			defer st.Close()
			// --json: encoding/json escapes C0 controls; termsafe.JSON the C1
			// ones it leaves raw. Text: every field is escaped (termsafe.Line).
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			for {
				ev, err := st.Next()
				if errors.Is(err, io.EOF) || ctx.Err() != nil {
					return nil
				}
				if err != nil {
					return withCode(ExitFailure, err)
				}
				if asJSON {
					buf.Reset()
					if enc.Encode(ev) == nil {
						_, _ = a.stdout.Write(termsafe.JSON(buf.Bytes()))
					}
					continue
				}
				fmt.Fprintln(a.stdout, eventLine(ev))
			}
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&from, "from", 0, "print the events after this sequence number")
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new events")
	f.BoolVar(&asJSON, "json", false, "print one JSON object a line")
	return cmd
}

// eventLine renders an event for people: sequence, time, kind, state, details.
// Its fields may come from inside the sandbox: control characters are escaped.
func eventLine(ev client.Event) string {
	var d []string
	add := func(k, v string) {
		if v != "" {
			d = append(d, k+"="+termsafe.Line(v))
		}
	}
	add("daemon", ev.Daemon)
	add("service", ev.Service)
	add("exec", ev.ExecID)
	if ev.PID != 0 {
		add("pid", fmt.Sprint(ev.PID))
	}
	if ev.ExitCode != nil {
		add("exit_code", fmt.Sprint(*ev.ExitCode))
	}
	add("signal", ev.Signal)
	if ev.Attempt != 0 {
		add("attempt", fmt.Sprint(ev.Attempt))
	}
	if ev.DelayMS != nil {
		add("delay_ms", fmt.Sprint(*ev.DelayMS))
	}
	add("reason", ev.Reason)
	return fmt.Sprintf("%4d  %s  %-18s %-8s %s", ev.Sequence, ev.Time.Local().Format("15:04:05.000"), termsafe.Line(ev.Kind), termsafe.Line(ev.State), strings.Join(d, " "))
}
