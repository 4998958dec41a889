package cli

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/trust"
)

func init() { addCommand(newTrustCommand) }

func newTrustCommand(a *app) *cobra.Command {
	var yes, dryRun bool
	cmd := &cobra.Command{
		Use:   "trust [--yes] [--dry-run]",
		Short: "Accept manifest layers that changed while a sandbox of the project ran (shows the diff)",
		Long: "trust shows, file by file, how the project's manifest layers (sandbox.toml, sandbox.local.toml,\n" +
			"presets named by path, user presets, .airlockignore) differ from the ones last accepted, which\n" +
			"changed while a sandbox could write them, and what the change widens (mounts, privileges,\n" +
			"capabilities, network, ports, egress, tools, ...); then it accepts them, so that the next up or\n" +
			"run uses them. On a terminal it asks first, unless --yes; --dry-run only shows.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.trust(yes, dryRun)
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "accept without asking on a terminal")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show the changes, accept nothing")
	return cmd
}

func (a *app) trust(yes, dryRun bool) error {
	// The layers as they are, without the vault: trust shows and accepts
	// files, it starts nothing.
	file, err := a.manifestFile()
	if err != nil {
		return err
	}
	l, err := a.loader()
	if err != nil {
		return err
	}
	r, snap, err := trust.Read(*l, file)
	if err != nil {
		if manifest.IsConfigError(err) {
			return configError(err)
		}
		return withCode(ExitUsage, err)
	}
	if err := a.setProject(r); err != nil {
		return err
	}
	if err := snap.Add(filepath.Join(r.ProjectDir, projectfs.IgnoreFile)); err != nil {
		return withCode(ExitAirlock, err)
	}
	store, err := a.trustStore()
	if err != nil {
		return err
	}
	changes, err := store.Review(r.File, r.ProjectDir, snap, a.sessionResolver())
	if err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot read the trust record: %w", err))
	}
	if len(changes) == 0 {
		if !dryRun {
			if err := store.Accept(r.File, r.ProjectDir, snap); err != nil {
				return withCode(ExitAirlock, fmt.Errorf("cannot record the trusted layers: %w", err))
			}
		}
		fmt.Fprintf(a.stdout, "nothing to trust: the layers of %s are as last accepted\n", displayPath(r.File))
		return nil
	}
	printLayerChanges(a.stdout, changes, a.layerWidening(r, snap, changes))
	if dryRun {
		return nil
	}
	if !yes && isTerminal(a.stdin) && isTerminal(a.stdout) {
		fmt.Fprint(a.stdout, "Trust these layers? [y/N] ")
		if !readYes(a.stdin) {
			return withCode(ExitFailure, errors.New("nothing trusted"))
		}
	}
	if err := store.Accept(r.File, r.ProjectDir, snap); err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot record the trusted layers: %w", err))
	}
	fmt.Fprintln(a.stdout, "trusted: the next up or run uses these layers")
	return nil
}
