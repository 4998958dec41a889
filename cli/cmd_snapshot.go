package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
)

// Snapshots and forks (docs/snapshots.md): airlock snapshot, airlock
// snapshots [ls|rm], airlock create --from-snapshot, airlock fork.

func init() {
	addCommand(newSnapshotCommand)
	addCommand(newSnapshotsCommand)
	addCommand(newCreateCommand)
	addCommand(newForkCommand)
}

func newSnapshotCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot SANDBOX [NAME]",
		Short: "Save a sandbox's filesystems (its primary's and its services') as images: a snapshot",
		Long: "snapshot saves the files of the sandbox's primary and of each service, each paused while copied, as local\n" +
			"images of its Engine (airlock-snapshot/NAME:…), with the manifest it was made from (substituted values masked).\n" +
			"`airlock create --from-snapshot NAME` starts a sandbox of it; `airlock snapshots` lists them. Memory is not saved.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			c, err := a.daemonClient(ctx)
			if err != nil {
				return err
			}
			list, err := a.targets(ctx, c, args[:1], nil)
			if err != nil {
				return err
			}
			name := ""
			if len(args) > 1 {
				name = args[1]
			}
			snap, err := c.TakeSnapshot(ctx, list[0].ID, name)
			if err != nil {
				return snapshotFailure(err)
			}
			fmt.Fprintln(a.stdout, snap.Name)
			return nil
		},
	}
}

func newSnapshotsCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "snapshots",
		Short: "List the daemon's snapshots (snapshots rm NAME removes one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			c, err := a.daemonClient(ctx)
			if err != nil {
				return err
			}
			list, err := c.Snapshots(ctx)
			if err != nil {
				return snapshotFailure(err)
			}
			if asJSON {
				return a.printJSON(list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSANDBOX\tCREATED\tSERVICES\tPRIMARY IMAGE")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", s.Name, s.Sandbox, s.CreatedAt.Local().Format(time.DateTime), len(s.Services), s.Primary.Image)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the snapshots as JSON")
	cmd.AddCommand(&cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove snapshots (refused while a sandbox made from one exists)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			c, err := a.daemonClient(ctx)
			if err != nil {
				return err
			}
			for _, n := range args {
				if _, err := c.DeleteSnapshot(ctx, n); err != nil {
					return snapshotFailure(err)
				}
				if !a.opts.quiet {
					fmt.Fprintf(a.stdout, "removed %s\n", n)
				}
			}
			return nil
		},
	})
	return cmd
}

func newCreateCommand(a *app) *cobra.Command {
	var from, id string
	var labels []string
	cmd := &cobra.Command{
		Use:   "create --from-snapshot NAME [--id ID] [--label K=V]",
		Short: "Create and start a sandbox from a snapshot; prints its ID once it is ready",
		Long: "create makes an up sandbox of a snapshot: the manifest it recorded, with the snapshot's images for the\n" +
			"primary and each service. A snapshot whose manifest has substituted values (${NAME}, vault) needs them\n" +
			"again: create resolves them as `up` does (the environment, the vault) from the manifest file the\n" +
			"snapshot was made from (or --file), and fails naming what it cannot resolve. The values go to the daemon\n" +
			"only, as up's do; `airlock fork` reuses the sandbox's own.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return withCode(ExitUsage, errors.New("create needs --from-snapshot NAME"))
			}
			lbl, err := parseLabels(labels)
			if err != nil {
				return err
			}
			ctx := context.Background()
			c, err := a.daemonClient(ctx)
			if err != nil {
				return err
			}
			secrets, err := a.snapshotSecrets(ctx, c, from)
			if err != nil {
				return err
			}
			sb, err := c.Create(ctx, &client.CreateRequest{ID: id, Kind: client.KindUp, FromSnapshot: from, Labels: lbl, Secrets: secrets, Start: true})
			if err != nil {
				return snapshotFailure(err)
			}
			if err := waitReadyOrFail(ctx, c, sb.ID); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, sb.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from-snapshot", "", "the snapshot to make the sandbox of")
	cmd.Flags().StringVar(&id, "id", "", "the sandbox's ID (default: a new UUID)")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "a label KEY=VALUE (repeatable)")
	return cmd
}

func newForkCommand(a *app) *cobra.Command {
	var n int
	var ids []string
	cmd := &cobra.Command{
		Use:   "fork SANDBOX [-n N] [--id ID]...",
		Short: "Make N copies of a running sandbox (a snapshot, then N sandboxes of it); prints their IDs once ready",
		Long: "fork snapshots the sandbox (fork-…, kept: `airlock snapshots rm` it once the copies are gone) and creates N\n" +
			"up sandboxes of it with its labels and values. The copies share nothing: a file one writes is not in another.\n" +
			"--id names the copies (one a copy; -n may be left out). A fork is whole or nothing: when a copy cannot be\n" +
			"made (its ID in use) the daemon deletes those made and the fork's snapshot, and fork fails.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			c, err := a.daemonClient(ctx)
			if err != nil {
				return err
			}
			list, err := a.targets(ctx, c, args, nil)
			if err != nil {
				return err
			}
			req := &client.ForkRequest{Count: n, IDs: ids}
			if len(ids) > 0 && !cmd.Flags().Changed("count") {
				req.Count = len(ids)
			}
			fk, err := c.ForkWith(ctx, list[0].ID, req)
			if err != nil {
				return snapshotFailure(err)
			}
			var failed error
			for _, sb := range fk.Sandboxes {
				if err := waitReadyOrFail(ctx, c, sb.ID); err != nil && failed == nil {
					failed = err
				}
			}
			for _, sb := range fk.Sandboxes {
				fmt.Fprintln(a.stdout, sb.ID)
			}
			return failed
		},
	}
	cmd.Flags().IntVarP(&n, "count", "n", 1, "how many copies (1 to 64)")
	cmd.Flags().StringArrayVar(&ids, "id", nil, "a copy's ID (repeatable: one a copy; default: new UUIDs)")
	return cmd
}

// waitReadyOrFail waits until sandbox id is ready; its failure is the error.
func waitReadyOrFail(ctx context.Context, c *client.Client, id string) error {
	sb, ev, err := c.WaitState(ctx, id, client.StateReady, client.StateFailed, client.StateDeleted)
	if err != nil {
		return apiFailure(err)
	}
	if sb.State != client.StateReady {
		return withCode(ExitAirlock, fmt.Errorf("sandbox %s is %s: %s", id, sb.State, ev.Reason))
	}
	return nil
}

// snapshotFailure is apiFailure, with the snapshot reasons' exit codes: a
// missing snapshot or one in use is the caller's (1), a backend without
// snapshots airlock's (125).
func snapshotFailure(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) {
		switch ce.Reason {
		case client.ReasonSnapshotNotFound, client.ReasonSnapshotInUse, client.ReasonSnapshotExists:
			return withCode(ExitFailure, errors.New(ce.Message))
		}
	}
	return apiFailure(err)
}
