//go:build linux

// The supervisor runs only on Linux; cmd_supervise_other.go stands in elsewhere.

package insandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/exitcode"

	"github.com/airlock-dev/airlock/supervisor"
)

// SuperviseCommand is the hidden in-container supervisor (design.md §6): PID 1
// of every sandbox, run by the runtime, not by people.
func SuperviseCommand(o IO) *cobra.Command {
	var (
		specPath    string
		specJSON    string
		secretsPath string
		backoffUnit time.Duration
		resetAfter  time.Duration
	)
	cmd := &cobra.Command{
		Use:    "supervise --spec PATH [--secrets PATH]",
		Short:  "Run the sandbox's daemons and main command as PID 1 from a spec file",
		Long:   "supervise runs inside a sandbox as PID 1: it starts the daemons of the spec file, waits for their\nready checks, runs the main command in the foreground and shuts the daemons down when it exits.\nSee docs/supervisor.md.",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if specPath == "" && specJSON == "" {
				return exitcode.With(exitcode.Usage, errors.New("cannot supervise: --spec is required (or --spec-json)"))
			}
			code, err := supervisor.Run(supervisor.Options{
				SpecPath:    specPath,
				SpecJSON:    specJSON,
				SecretsPath: secretsPath,
				Quiet:       *o.Quiet,
				Messages:    o.Stderr,
				BackoffUnit: backoffUnit,
				ResetAfter:  resetAfter,
				// PID 1 of the sandbox (the container's entrypoint) may
				// end its other processes for a sealed end.
				Seal: os.Getpid() == 1,
			})
			if err != nil {
				return exitcode.With(code, err)
			}
			if code != exitcode.OK {
				return exitcode.Only(code)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&specPath, "spec", "", "path of the supervisor spec file (JSON, see docs/supervisor.md)")
	f.StringVar(&specJSON, strings.TrimPrefix(supervisor.SpecFlag, "--"), "", "the spec itself (JSON), instead of --spec")
	f.StringVar(&secretsPath, "secrets", "", "path of the secrets file (JSON object); read once, then deleted")
	f.DurationVar(&backoffUnit, "backoff-unit", time.Second, "restart delay unit (for tests)")
	f.DurationVar(&resetAfter, "reset-after", supervisor.DefaultResetAfter, "run length that resets the restart count (for tests)")
	_ = f.MarkHidden("backoff-unit")
	_ = f.MarkHidden("reset-after")
	cmd.AddCommand(newSuperviseExecCommand(), newSuperviseWrapCommand(), newSuperviseDeliverCommand(), newSuperviseTailCommand(),
		newSuperviseInstallCommand(), newSuperviseUntarCommand(), newSuperviseTarCommand(), newSuperviseSignalCommand(), newSuperviseKeepCommand(), newSuperviseAloneCommand(),
		newSuperviseFsCommand(), newSuperviseChannelCommand())
	return cmd
}

// newSuperviseExecCommand runs a command inside a running sandbox the way the
// sandbox runs its main command; `airlock exec` and `airlock up` call it through
// the Engine's exec API.
func newSuperviseExecCommand() *cobra.Command {
	var (
		specPath   string
		env        []string
		valuesPath string
		workdir    string
		pidDir     string
	)
	cmd := &cobra.Command{
		Use:    "exec --spec PATH [--values PATH] [-e K=V] [-w DIR] -- CMD [ARG...]",
		Short:  "Replace this process with CMD, with the sandbox's environment",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if specPath == "" {
				return exitcode.With(exitcode.Usage, errors.New("cannot exec: --spec is required"))
			}
			code, err := supervisor.Exec(supervisor.ExecOptions{SpecPath: specPath, Env: env, ValuesPath: valuesPath, Workdir: workdir, PIDDir: pidDir, Argv: args})
			return exitcode.With(code, err)
		},
	}
	cmd.Flags().SetInterspersed(false)
	f := cmd.Flags()
	f.StringVar(&specPath, "spec", "", "path of the supervisor spec file")
	f.StringArrayVarP(&env, "env", "e", nil, "environment NAME=VALUE over the sandbox's (repeatable)")
	f.StringVar(&valuesPath, "values", "", "more NAME=VALUE from this file (supervise deliver --exec-env), removed once read")
	f.StringVarP(&workdir, "workdir", "w", "", "working directory (default: the main command's)")
	f.StringVar(&pidDir, "pid-dir", supervisor.ExecPIDDir, "where an API exec records its PID (for tests)")
	_ = f.MarkHidden("pid-dir")
	return cmd
}

// newSuperviseWrapCommand starts a service container's command with its
// substituted env values from a secrets file (see supervisor.Wrap).
func newSuperviseWrapCommand() *cobra.Command {
	var (
		secretsPath string
		socket      string
		env         []string
	)
	cmd := &cobra.Command{
		Use:    "wrap (--socket PATH | --secrets PATH) [--env NAME=key]... -- CMD [ARG...]",
		Short:  "Replace this process with CMD, with env values delivered to a socket (or read from a file)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := supervisor.Wrap(supervisor.WrapOptions{SecretsPath: secretsPath, Socket: socket, Env: env, Argv: args})
			return exitcode.With(code, err)
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&secretsPath, "secrets", "", "the secrets file (read once, then deleted)")
	cmd.Flags().StringVar(&socket, "socket", "", "wait for the values on this unix socket (airlock supervise deliver)")
	cmd.Flags().StringArrayVar(&env, "env", nil, "NAME=key: set NAME to the file's value for key (repeatable)")
	return cmd
}

// newSuperviseDeliverCommand hands secret values (a JSON object on stdin) to the
// process waiting for them on a socket inside the container; the host runs it as
// a non-TTY exec, so the values cross the Engine API only.
func newSuperviseDeliverCommand() *cobra.Command {
	var socket, execEnv string
	cmd := &cobra.Command{
		Use:    "deliver (--socket PATH | --exec-env PATH) < values.json",
		Short:  "Deliver secret values from stdin to the sandbox's supervisor (or an exec's values to a file)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if execEnv != "" {
				if err := supervisor.StashExecEnv(execEnv, cmd.InOrStdin()); err != nil {
					return exitcode.With(exitcode.Airlock, err)
				}
				return nil
			}
			if socket == "" {
				return exitcode.With(exitcode.Usage, errors.New("cannot deliver: --socket or --exec-env is required"))
			}
			if err := supervisor.Deliver(socket, cmd.InOrStdin(), 10*time.Second); err != nil {
				return exitcode.With(exitcode.Airlock, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "the receiver's unix socket")
	cmd.Flags().StringVar(&execEnv, "exec-env", "", "write an exec's environment (a JSON array of NAME=VALUE) to this new file, for supervise exec --values")
	return cmd
}

// newSuperviseTailCommand prints a file of the sandbox's state (the status stream,
// a daemon log) from an offset, and with --follow what is appended; the host reads
// it through the Engine's exec API.
func newSuperviseTailCommand() *cobra.Command {
	var (
		from    int64
		lines   int
		maxLine int
		follow  bool
		report  string
	)
	cmd := &cobra.Command{
		Use:    "tail [--from N | --lines N] [--follow] FILE",
		Short:  "Print a regular file from a byte offset, following appends",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
			defer cancel()
			if err := supervisor.Tail(ctx, supervisor.TailOptions{Path: args[0], From: from, ByLines: lines >= 0, Lines: lines, MaxLine: maxLine, Follow: follow, Out: cmd.OutOrStdout(), Report: report}); err != nil {
				return exitcode.With(exitcode.Airlock, err)
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&from, "from", 0, "byte offset to start at")
	cmd.Flags().IntVar(&lines, "lines", -1, "start at the last N lines (read backwards from the end; see supervisor.TailStart) instead of --from")
	cmd.Flags().IntVar(&maxLine, "max-line", 0, "cut lines longer than this many bytes, with a marker (0: copy the bytes as they are)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing what is appended")
	cmd.Flags().StringVar(&report, "report", "", "write the offset copied so far to this file after each copy")
	return cmd
}

// newSuperviseInstallCommand copies this executable to a path: the Kubernetes
// backend's init container, from an image holding only /airlock, puts the
// supervisor on the volume the sandbox container runs it from.
func newSuperviseInstallCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "install DEST",
		Short:  "Copy this airlock executable to DEST (mode 0755), creating its folder",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := supervisor.Install(args[0]); err != nil {
				return exitcode.With(exitcode.Airlock, err)
			}
			return nil
		},
	}
}

// newSuperviseUntarCommand extracts a tar stream from stdin into a folder of
// the sandbox (the Kubernetes backend's copy of the project and [copies]).
func newSuperviseUntarCommand() *cobra.Command {
	var owner string
	cmd := &cobra.Command{
		Use:    "untar [--owner UID:GID] DIR < archive.tar",
		Short:  "Extract a tar archive from stdin into DIR, never following a symbolic link",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := supervisor.UntarOptions{Dir: args[0], In: cmd.InOrStdin(), Warn: warnTo(cmd)}
			if owner != "" {
				own, err := supervisor.ParseOwner(owner)
				if err != nil {
					return exitcode.With(exitcode.Usage, fmt.Errorf("invalid --owner: %w", err))
				}
				o.Owner = &own
			}
			if err := supervisor.Untar(o); err != nil {
				return exitcode.With(exitcode.Airlock, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "owner of every entry, UID:GID (default: the archive's when run as root)")
	return cmd
}

// newSuperviseTarCommand writes a tar archive of paths to stdout in the layout
// of the Engine's archive API (the Kubernetes backend's `run --output`).
func newSuperviseTarCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    "tar [--from-dir DIR] PATH... > archive.tar",
		Short:  "Write a tar archive of each PATH, named from its base name, to stdout",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := supervisor.TarOptions{Dir: dir, Paths: args, Out: cmd.OutOrStdout(), Warn: warnTo(cmd)}
			if err := supervisor.Tar(o); err != nil {
				return exitcode.With(exitcode.Airlock, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "from-dir", "", "folder the relative paths are in (default: the working directory)")
	return cmd
}

// newSuperviseSignalCommand sends a signal to PID 1 of the sandbox, the
// supervisor, which forwards it to the main command (Kubernetes has no API to
// signal a container).
//
// With --exec ID it signals the process group of that API exec instead (the
// daemon's exec signals, timeouts and kills): it prints "signalled", or
// "gone" when no process of the exec is left.
func newSuperviseSignalCommand() *cobra.Command {
	var execID, pidDir string
	cmd := &cobra.Command{
		Use:    "signal [--exec ID] SIGNAL",
		Short:  "Send SIGNAL (TERM, SIGINT, 15, …) to PID 1 of this PID namespace, or to an exec's processes",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sig, err := supervisor.ParseSignal(args[0])
			if err != nil {
				return exitcode.With(exitcode.Usage, err)
			}
			if execID != "" {
				got, err := supervisor.SignalExec(pidDir, execID, sig)
				if err != nil {
					return exitcode.With(exitcode.Airlock, err)
				}
				if got {
					fmt.Fprintln(cmd.OutOrStdout(), "signalled")
				} else {
					fmt.Fprintln(cmd.OutOrStdout(), "gone")
				}
				return nil
			}
			if err := supervisor.SignalInit(sig); err != nil {
				return exitcode.With(exitcode.Airlock, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&execID, "exec", "", "signal the process group of this API exec (its ID)")
	cmd.Flags().StringVar(&pidDir, "pid-dir", supervisor.ExecPIDDir, "where API execs record their PIDs (for tests)")
	_ = cmd.Flags().MarkHidden("pid-dir")
	return cmd
}

// warnTo prints a warning line of a subcommand on its stderr.
func warnTo(cmd *cobra.Command) func(string) {
	return func(line string) { fmt.Fprintf(cmd.ErrOrStderr(), "airlock: warning: %s\n", line) }
}

// newSuperviseChannelCommand serves the exec channel on its stdin and stdout
// (supervisor.ServeChannel): the host starts commands of the sandbox through
// it without an Engine exec each.
func newSuperviseChannelCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "channel",
		Short:  "Start commands for the host, framed on stdin and stdout",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := supervisor.ServeChannel(os.Stdin, os.Stdout); err != nil {
				return exitcode.With(exitcode.Airlock, fmt.Errorf("cannot serve the exec channel: %w", err))
			}
			return nil
		},
	}
}

// newSuperviseKeepCommand idles until it is told to stop (SIGTERM, SIGINT): the
// Kubernetes backend's keeper container, which keeps a Pod's project readable
// after its primary ended.
func newSuperviseKeepCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "keep",
		Short:  "Idle until stopped",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT)
			defer cancel()
			<-ctx.Done()
			return nil
		},
	}
}

// newSuperviseAloneCommand tells, by its exit code, whether nothing but PID 1
// (and itself) runs in the sandbox: the Kubernetes backend's check of a sealed
// end marker, which the Docker backend makes through the Engine.
func newSuperviseAloneCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "alone",
		Short:  "Exit 0 when no process but PID 1 and this one runs in this PID namespace, else 1",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !supervisor.Alone() {
				return exitcode.Only(exitcode.Failure)
			}
			return nil
		},
	}
}
