package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/termsafe"
)

func init() { addCommand(newPoolCommand) }

func newPoolCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Warm pools: sandboxes started in advance for airlock run ([sandbox.pool], docs/pool.md)",
		Long: "A manifest with [sandbox.pool] size = N has the daemon keep N sandboxes of it made, started and parked\n" +
			"(services healthy, daemons that take no substituted value ready); airlock run takes one when it is exactly\n" +
			"what a cold start would make now, and only delivers its command, env and values. pool ls shows the pools,\n" +
			"pool warm fills this project's pool now and waits (the start of a CI job), pool drain empties pools.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newPoolLsCommand(a), newPoolWarmCommand(a), newPoolDrainCommand(a))
	return cmd
}

func newPoolLsCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls [--json]",
		Short: "List the daemon's warm pools: size, ready, hits, misses and why, stale, failures",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			c, err := a.daemonClient(ctx)
			if err != nil {
				return err
			}
			list, err := c.Pools(ctx)
			if err != nil {
				return apiFailure(err)
			}
			if asJSON {
				return a.printJSON(list)
			}
			a.printPools(list)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the pools as JSON")
	return cmd
}

// printPools is pool ls's table.
func (a *app) printPools(list *client.PoolList) {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tKEY\tSIZE\tREADY\tHITS\tMISSES\tSTALE\tFAILURES\tLAST USED")
	for _, p := range list.Pools {
		misses := 0
		var why []string
		for _, k := range slices.Sorted(maps.Keys(p.Misses)) {
			misses += p.Misses[k]
			why = append(why, fmt.Sprintf("%s %d", k, p.Misses[k]))
		}
		m := fmt.Sprint(misses)
		if len(why) > 0 {
			m += " (" + strings.Join(why, ", ") + ")"
		}
		ready := fmt.Sprint(p.Ready)
		if p.Starting > 0 {
			ready += fmt.Sprintf(" (+%d starting)", p.Starting)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%d\t%d\t%s ago\n", termsafe.Line(p.Project), p.Key, p.Size, ready, p.Hits, m,
			p.Stale, p.Failures, time.Since(p.LastUsed).Round(time.Second))
	}
	_ = tw.Flush()
	for _, p := range list.Pools {
		if p.LastError != "" {
			fmt.Fprintf(a.stdout, "%s: last failure: %s\n", termsafe.Line(p.Project), termsafe.Line(p.LastError))
		}
	}
	fmt.Fprintf(a.stdout, "pooled: %d of runtime.pool_max %d\n", list.Pooled, list.PoolMax)
}

func newPoolWarmCommand(a *app) *cobra.Command {
	var size int
	cmd := &cobra.Command{
		Use:   "warm [--size N]",
		Short: "Fill this project's pool now and wait until its sandboxes are parked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if size < 0 {
				return withCode(ExitUsage, errors.New("--size must not be negative"))
			}
			return a.poolWarm(size)
		},
	}
	cmd.Flags().IntVar(&size, "size", 0, "how many sandboxes to park (default: sandbox.pool.size); it holds until the pool is drained")
	return cmd
}

func (a *app) poolWarm(size int) error {
	su, r, layers, err := a.beginWithManifest()
	defer su.close()
	if err != nil {
		return err
	}
	ctx := su.ctx
	tgt, err := a.target()
	if err != nil {
		return err
	}
	if tgt.clientFiles {
		return withCode(ExitUsage, errors.New("a warm pool needs a daemon that shares this machine's files (its key fingerprints what is copied in): not a daemon on another machine (docs/pool.md)"))
	}
	// As a run has them (the same key): layers read-only, the pool a session.
	protected := a.protectLayers(r, layers, tgt.projectCopied(r))
	if store, err := a.trustStore(); err == nil {
		if err := store.BeginPool(r.File, a.sessionRoots(r, tgt.projectCopied(r), false), protected); err != nil {
			fmt.Fprintf(a.stderr, "airlock: warning: cannot record the warm pool in the trust record: %v\n", err)
		}
	}
	c, err := a.daemonClient(ctx)
	if err != nil {
		return err
	}
	made, err := a.prepareViaDaemon(ctx, c, r, tgt.engine)
	if err != nil {
		return err
	}
	wm, values, err := wireManifest(made)
	if err != nil {
		return err
	}
	start := time.Now()
	p, err := c.WarmPool(ctx, &client.WarmRequest{Manifest: wm, Secrets: values, Engine: tgt.engine, Size: size})
	if err != nil {
		return apiFailure(err)
	}
	if !a.opts.quiet {
		fmt.Fprintf(a.stdout, "pool of %s: %d ready (key %s) in %s\n", termsafe.Line(p.Project), p.Ready, p.Key, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func newPoolDrainCommand(a *app) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "drain [--all]",
		Short: "Remove the parked sandboxes of this project's pools (--all: of every pool)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			req := &client.DrainRequest{All: all}
			if !all {
				dir, err := a.projectDir()
				if err != nil {
					return err
				}
				req.Project = dir
			}
			c, err := a.daemonClient(ctx)
			if err != nil {
				return err
			}
			res, err := c.DrainPools(ctx, req)
			if err != nil {
				return apiFailure(err)
			}
			if !a.opts.quiet {
				fmt.Fprintf(a.stdout, "removed %d parked sandbox(es)\n", res.Removed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "drain every pool of the daemon")
	return cmd
}
