package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/termsafe"
)

func init() { addCommand(newPsCommand) }

func newPsCommand(a *app) *cobra.Command {
	var all, asJSON, pooled bool
	var labels []string
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List sandboxes with state, project, age, daemons up/total and published ports",
		Long:  "ps lists the sandboxes the daemon knows: pending and ready ones, and with -a stopped and failed ones too.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			want, err := parseLabels(labels)
			if err != nil {
				return err
			}
			c, err := a.daemonClient(ctx)
			if err != nil {
				return err
			}
			list, err := c.List(ctx, want)
			if err != nil {
				return apiFailure(err)
			}
			shown := []client.Sandbox{}
			for _, s := range list {
				// A sandbox being removed is gone for the user (run hands its
				// removal to the daemon): not listed, even with -a.
				if s.State == client.StateDeleting {
					continue
				}
				if all || s.State == client.StatePending || s.State == client.StateReady || s.State == client.StatePaused {
					shown = append(shown, s)
				}
			}
			if pooled && len(want) == 0 {
				// The warm pools' parked sandboxes, which serve no one yet.
				pl, err := c.Pools(ctx)
				if err != nil {
					return apiFailure(err)
				}
				for _, p := range pl.Pools {
					for _, m := range p.Sandboxes {
						state := "parked"
						if !m.Ready {
							state = "parking"
						}
						shown = append(shown, client.Sandbox{ID: m.ID, State: state, Kind: "pool", Project: p.Project, CreatedAt: m.Since})
					}
				}
			}
			if asJSON {
				b, err := json.MarshalIndent(shown, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, string(termsafe.JSON(b)))
				return nil
			}
			// An ENGINE column when the sandboxes shown span more than one Engine.
			engines := map[string]bool{}
			for _, s := range shown {
				engines[engineName(s.Engine)] = true
			}
			multi := len(engines) > 1
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			head := "ID\tSTATE\tKIND\tPROJECT\tAGE\tDAEMONS\tPORTS\tLABELS"
			if multi {
				head += "\tENGINE"
			}
			fmt.Fprintln(tw, head)
			for _, s := range shown {
				line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s", termsafe.Line(s.ID), termsafe.Line(psState(s)), termsafe.Line(s.Kind), termsafe.Line(s.Project), age(time.Since(s.CreatedAt)), s.Daemons.Up, s.Daemons.Total, portList(s.Ports), termsafe.Line(labelList(s.Labels)))
				if multi {
					line += "\t" + termsafe.Line(engineName(s.Engine))
				}
				fmt.Fprintln(tw, line)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&all, "all", "a", false, "include stopped and failed sandboxes")
	f.BoolVar(&asJSON, "json", false, "print a JSON array")
	f.BoolVar(&pooled, "pool", false, "include the warm pools' parked sandboxes (state parked, kind pool)")
	f.StringArrayVar(&labels, "label", nil, "only sandboxes with label KEY=VALUE (repeatable, all must match)")
	return cmd
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// portList shows published ports as docker ps does: 127.0.0.1:18080->8080/tcp, …
func portList(ports []client.Port) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ", ")
}

func labelList(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// engineName names a sandbox's Engine for people: its context, else its host.
func engineName(e *client.Engine) string {
	switch {
	case e == nil:
		return ""
	case e.Context != "":
		return e.Context
	}
	return engineHost(e)
}

// psState is what ps shows of a sandbox's state: a run whose main command
// exited while its daemons still shut down (its stop not yet recorded) shows
// as exited, with the code its run returned.
func psState(s client.Sandbox) string {
	if s.MainExitCode != nil && (s.State == client.StatePending || s.State == client.StateReady) {
		return fmt.Sprintf("exited (%d)", *s.MainExitCode)
	}
	return string(s.State)
}
