package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/client"
)

func init() { addCommand(newExecCommand) }

func newExecCommand(a *app) *cobra.Command {
	var env []string
	var workdir string
	var tty bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "exec [-e K=V] [-w DIR] [-t] [--timeout D] [SANDBOX] -- CMD [ARG...]",
		Short: "Run CMD in a running sandbox (default: this project's)",
		Long: "exec runs CMD in a running sandbox with the sandbox's [env] and exits with CMD's code. Without\n" +
			"SANDBOX it uses this project's sandbox (airlock up). A TTY is used when stdin and stdout are terminals.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, args, err := execArgs(args, cmd.ArgsLenAtDash())
			if err != nil {
				return err
			}
			envs, err := a.parseEnvFlags(env)
			if err != nil {
				return err
			}
			ctx := context.Background()
			c, err := a.daemonClient(ctx)
			if err != nil {
				return err
			}
			var ids []string
			if id != "" {
				ids = []string{id}
			}
			list, err := a.targets(ctx, c, ids, nil)
			if err != nil {
				return err
			}
			if list[0].State == client.StatePaused {
				return withCode(ExitFailure, fmt.Errorf("sandbox %s is paused (let it go on with `airlock unpause %s`)", list[0].ID, list[0].ID))
			}
			if list[0].State != client.StateReady {
				return withCode(ExitFailure, fmt.Errorf("sandbox %s is %s (start it with `airlock up -d`)", list[0].ID, list[0].State))
			}
			useTTY := isTerminal(a.stdin) && isTerminal(a.stdout)
			if tty && !useTTY {
				return withCode(ExitUsage, fmt.Errorf("-t needs stdin and stdout to be terminals"))
			}
			// Through the daemon, which runs it on the sandbox's Engine or
			// cluster and records it; the -e values travel to it privately
			// (held in memory, delivered apart from the exec's configuration).
			if timeout < 0 {
				return withCode(ExitUsage, fmt.Errorf("invalid --timeout: a duration is not negative"))
			}
			req := &client.ExecRequest{Cmd: args, Env: envs, Workdir: workdir, TTY: useTTY}
			req.Timeout = timeout.Seconds()
			code, err := a.execAttached(ctx, c, list[0].ID, req,
				useTTY || forwardsStdin(a.stdin))
			if err != nil {
				return err
			}
			if code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false)
	f := cmd.Flags()
	f.StringArrayVarP(&env, "env", "e", nil, "environment NAME=VALUE (or NAME, from the host) (repeatable)")
	f.StringVarP(&workdir, "workdir", "w", "", "working directory inside the sandbox")
	f.BoolVarP(&tty, "tty", "t", false, "require a terminal (the default when stdin and stdout are terminals)")
	f.DurationVar(&timeout, "timeout", 0, "end CMD after this long (30s, 5m): SIGTERM, SIGKILL 5 s later; exit code 124")
	return cmd
}

// execArgs splits exec's arguments into the sandbox ID (empty: this project's
// sandbox) and the command. Flags stop at the first argument that is not one
// (SetInterspersed(false), so that the command's own flags are left alone), which
// leaves a "--" after SANDBOX among the arguments, where cobra does not count it:
// ArgsLenAtDash is then -1 and args is [SANDBOX -- CMD...]. A "--" before any
// argument is cobra's own (dash 0: no SANDBOX).
func execArgs(args []string, dash int) (id string, cmd []string, err error) {
	switch {
	case dash == 1:
		id, cmd = args[0], args[1:]
	case dash > 1, dash < 0 && slices.Index(args, "--") > 1:
		return "", nil, withCode(ExitUsage, fmt.Errorf("give at most one SANDBOX before --"))
	case dash < 0 && len(args) >= 2 && args[1] == "--":
		id, cmd = args[0], args[2:]
	default:
		cmd = args
	}
	if len(cmd) == 0 {
		return "", nil, withCode(ExitUsage, fmt.Errorf("give the command after --"))
	}
	return id, cmd, nil
}
