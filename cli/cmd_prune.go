package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/engine"
)

func init() { addCommand(newPruneCommand) }

func newPruneCommand(a *app) *cobra.Command {
	var dryRun, all bool
	cmd := &cobra.Command{
		Use:   "prune [--dry-run] [--all]",
		Short: "Remove what no sandbox uses: old built images, supervisor volumes of other builds, old kept runs",
		Long: "prune removes, of this daemon's own objects only, what no sandbox uses:\n" +
			"  - run sandboxes kept (run --keep) and stopped for longer than runtime.event_retention_ttl;\n" +
			"  - images built from [sandbox.build] that no container uses, but the newest of each project (--all: that one too);\n" +
			"  - supervisor volumes of other airlock builds that no container mounts.\n" +
			"It prints one line per object removed and the space freed. Objects of another daemon (another user,\n" +
			"another state root) and objects without an owner label are never touched.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.prune(dryRun, all)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be removed and remove nothing")
	cmd.Flags().BoolVar(&all, "all", false, "remove the newest built image of each project too")
	return cmd
}

func (a *app) prune(dryRun, all bool) error {
	ctx := context.Background()
	// The caller's Engine too (none through another daemon: that one's own).
	var we *client.Engine
	if a.remoteHost() == "" {
		ep, err := engine.Resolve(a.getenv)
		if err != nil {
			return withCode(ExitAirlock, fmt.Errorf("cannot choose the Docker Engine: %w", err))
		}
		we = wireEngine(ep)
	}
	c, err := a.daemonClient(ctx)
	if err != nil {
		return err
	}
	res, err := c.Prune(ctx, &client.PruneRequest{DryRun: dryRun, All: all, Engine: we})
	if err != nil {
		return apiFailure(err)
	}
	engines := map[string]bool{}
	for _, o := range res.Removed {
		engines[o.Engine] = true
	}
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	for _, o := range res.Removed {
		if a.opts.quiet {
			break
		}
		line := fmt.Sprintf("%s %s %s", verb, o.Type, o.Name)
		if len(engines) > 1 && o.Engine != "" {
			line += " (on " + o.Engine + ")"
		}
		fmt.Fprintln(a.stdout, line)
	}
	if dryRun {
		fmt.Fprintf(a.stdout, "Total reclaimable space: %s\n", units.HumanSize(float64(res.Reclaimed)))
	} else {
		fmt.Fprintf(a.stdout, "Total reclaimed space: %s\n", units.HumanSize(float64(res.Reclaimed)))
	}
	if len(res.Errors) > 0 {
		return withCode(ExitAirlock, errors.New(strings.Join(res.Errors, "\nairlock: ")))
	}
	return nil
}
