//go:build linux

package insandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/signal"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/internal/exitcode"
	"github.com/airlock-dev/airlock/internal/fsentry"
	"github.com/airlock-dev/airlock/supervisor"
)

// newSuperviseFsCommand is `supervise fs list|stat|rm|mkdir|mv|watch`: the
// files API's operations that the Engine's archive API cannot do, run by the
// daemon as a short exec in the sandbox (the same on Docker and Kubernetes),
// as the sandbox's user. Each prints JSON on stdout: its result, or
// {"error": {"kind", "message"}} with exit code 1.
func newSuperviseFsCommand() *cobra.Command {
	var specPath string
	cmd := &cobra.Command{
		Use:    "fs list|stat|rm|mkdir|mv|watch [flags] -- PATH...",
		Short:  "List, describe, remove, make, rename or watch files of the sandbox, as its user (JSON out)",
		Hidden: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			// Cobra runs only the nearest persistent hook: the root's (which
			// refuses a bad --log-level, as every command does) first.
			for p := cmd.Parent(); p != nil; p = p.Parent() {
				if p.PersistentPreRunE != nil && p.Name() != "fs" {
					if err := p.PersistentPreRunE(cmd, args); err != nil {
						return err
					}
					break
				}
			}
			for i, a := range args {
				p, err := supervisor.FsPath(a)
				if err != nil {
					return fsFail(cmd, err)
				}
				args[i] = p
			}
			if specPath == "" {
				return nil
			}
			if err := supervisor.BecomeMainUser(specPath); err != nil {
				return fsFail(cmd, err)
			}
			return nil
		},
	}
	cmd.PersistentFlags().StringVar(&specPath, "spec", "", "the supervisor spec: act as its main user (main.user)")

	var depth, limit int
	list := &cobra.Command{
		Use: "list [--depth N] [--limit N] -- DIR", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := supervisor.FsList(args[0], max(depth, 1), max(limit, 1))
			return fsOut(cmd, l, err)
		},
	}
	list.Flags().IntVar(&depth, "depth", 1, "levels of subdirectories to list (1: DIR's entries)")
	list.Flags().IntVar(&limit, "limit", 10000, "at most this many entries")

	stat := &cobra.Command{
		Use: "stat -- PATH", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := supervisor.FsStat(args[0])
			return fsOut(cmd, e, err)
		},
	}

	var recursive, missingOK, fromStdin bool
	rm := &cobra.Command{
		Use: "rm [--recursive] [--missing-ok] [--stdin] -- [PATH]", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !fromStdin {
				if len(args) != 1 {
					return fsFail(cmd, &supervisor.FsError{Kind: fsentry.KindInvalid, Msg: "cannot remove: name one path, or give --stdin"})
				}
				if missingOK {
					return fsOut(cmd, struct{}{}, supervisor.FsRemoveAll(args, recursive, true))
				}
				return fsOut(cmd, struct{}{}, supervisor.FsRemove(args[0], recursive))
			}
			// The paths, NUL-terminated, on stdin: as many as a batch holds,
			// whatever bytes they are.
			b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), supervisor.MaxRemoveInput+1))
			if err != nil {
				return fsFail(cmd, err)
			}
			if len(b) > supervisor.MaxRemoveInput {
				return fsFail(cmd, &supervisor.FsError{Kind: fsentry.KindInvalid, Msg: "cannot remove: the list of paths is too long"})
			}
			var paths []string
			for _, p := range bytes.Split(b, []byte{0}) {
				if len(p) > 0 {
					paths = append(paths, string(p))
				}
			}
			return fsOut(cmd, struct{}{}, supervisor.FsRemoveAll(append(args, paths...), recursive, missingOK))
		},
	}
	rm.Flags().BoolVarP(&recursive, "recursive", "r", false, "a directory and all it holds")
	rm.Flags().BoolVar(&missingOK, "missing-ok", false, "a path that is not there is no error")
	rm.Flags().BoolVar(&fromStdin, "stdin", false, "remove the NUL-terminated paths read from stdin too")

	var parents bool
	mkdir := &cobra.Command{
		Use: "mkdir [--parents] -- DIR", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return fsOut(cmd, struct{}{}, supervisor.FsMkdir(args[0], parents))
		},
	}
	mkdir.Flags().BoolVarP(&parents, "parents", "p", false, "make missing parents; an existing directory is no error")

	var overwrite bool
	mv := &cobra.Command{
		Use: "mv [--overwrite] -- FROM TO", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return fsOut(cmd, struct{}{}, supervisor.FsRename(args[0], args[1], overwrite))
		},
	}
	mv.Flags().BoolVar(&overwrite, "overwrite", false, "replace TO when it exists")

	var wo supervisor.WatchOptions
	watch := &cobra.Command{
		Use:   "watch [--max-dirs N] [--rate N] [--recursive] -- DIR",
		Short: "Print the changes under DIR as lines of JSON until stdin ends",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
			defer cancel()
			// The daemon's end of the exec is stdin: once it ends (the
			// client went away), so does the watch.
			go func() {
				_, _ = io.Copy(io.Discard, cmd.InOrStdin())
				cancel()
			}()
			wo.Path, wo.Out = args[0], cmd.OutOrStdout()
			if err := supervisor.FsWatch(ctx, wo); err != nil {
				return fsFail(cmd, err)
			}
			return nil
		},
	}
	watch.Flags().IntVar(&wo.MaxDirs, "max-dirs", supervisor.DefaultWatchMaxDirs, "watch at most this many directories")
	watch.Flags().IntVar(&wo.Rate, "rate", supervisor.DefaultWatchRate, "write at most this many events a second")
	watch.Flags().BoolVarP(&wo.Recursive, "recursive", "r", false, "watch the directories below DIR too")

	for _, c := range []*cobra.Command{list, stat, rm, mkdir, mv, watch} {
		c.Hidden = true
		cmd.AddCommand(c)
	}
	return cmd
}

// fsOut prints v as JSON, or err as a failure.
func fsOut(cmd *cobra.Command, v any, err error) error {
	if err != nil {
		return fsFail(cmd, err)
	}
	if err := json.NewEncoder(cmd.OutOrStdout()).Encode(v); err != nil {
		return exitcode.With(exitcode.Airlock, err)
	}
	return nil
}

// fsFail prints err as {"error": …} and exits 1.
func fsFail(cmd *cobra.Command, err error) error {
	var f fsentry.Failure
	f.Error.Kind, f.Error.Message = fsentry.KindOther, err.Error()
	var fe *supervisor.FsError
	if errors.As(err, &fe) {
		f.Error.Kind = fe.Kind
	}
	_ = json.NewEncoder(cmd.OutOrStdout()).Encode(f)
	return exitcode.Only(exitcode.Failure)
}
