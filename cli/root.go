// Package cli holds airlock's command line: one cmd_<name>.go file per command.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/daemonfiles"
	"github.com/airlock-dev/airlock/internal/exitcode"
	"github.com/airlock-dev/airlock/internal/termsafe"
	"github.com/airlock-dev/airlock/secrets"
	"github.com/airlock-dev/airlock/userconfig"
)

// Exit codes of design.md §9.
const (
	ExitOK          = exitcode.OK
	ExitFailure     = exitcode.Failure
	ExitUsage       = exitcode.Usage
	ExitAirlock     = exitcode.Airlock
	ExitNotExec     = exitcode.NotExec
	ExitNotFound    = exitcode.NotFound
	ExitInterrupted = exitcode.Interrupted
)

// globalOptions are the flags every command accepts (§9).
type globalOptions struct {
	quiet    bool
	file     string
	project  string // --project: the project dir, when not the manifest's folder
	logLevel string
	// logLevelSet tells whether --log-level was given (its default is "info").
	logLevelSet bool
	// backend is --backend, backendSet whether it was given (see app.backend).
	backend    string
	backendSet bool
	// host is -H/--host: a daemon other than the local one (see remoteHost).
	host string
	// remoteCommand is --remote-command, install --install (remoteinstall.go).
	remoteCommand string
	install       bool
}

// app carries the global options and the streams of one invocation, so tests
// can run commands in-process with their own streams.
type app struct {
	// daemonLost is set once a call of this command found its control daemon
	// gone (retryDaemon started it again).
	daemonLost atomic.Bool
	opts       globalOptions
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
	getenv     func(string) (string, bool)
	// redactor masks the manifest's substituted values in airlock's own messages.
	redactor *secrets.Redactor
	// daemonMain is Options.RunDaemon: `airlock daemon run`.
	daemonMain func(context.Context, daemonfiles.Run) error
	// steps is when a run reached each of its steps (timeline.go).
	steps timeline
	// remotes holds the clients of remote daemons this invocation reached,
	// by address: one ssh connection per command (remote.go).
	remotes remoteClients
	// earlyHealth is the local daemon's health, asked ahead (askHealthEarly).
	earlyHealth chan healthAnswer
}

// Options are what the program gives the command line besides its arguments.
type Options struct {
	// RunDaemon runs the control daemon in this process (`airlock daemon
	// run`): cmd/airlock passes daemon.Main. The command line itself speaks
	// to the daemon through its API only, and does not import it.
	RunDaemon func(context.Context, daemonfiles.Run) error
}

// exitError carries an exit code up to Main; its message, when not empty, is
// printed on stderr.
type exitError = exitcode.Error

// withCode wraps err so that Main exits with code.
func withCode(code int, err error) error { return exitcode.With(code, err) }

// exitCode returns the exit code a command with no message should end with.
func exitCode(code int) error { return exitcode.Only(code) }

// printJSON prints v on stdout as indented JSON (a command's --json).
func (a *app) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, string(b))
	return nil
}

// commandFactories lists the constructors of the top-level commands; each
// cmd_<name>.go file adds its own in an init function.
var commandFactories []func(*app) *cobra.Command

func addCommand(f func(*app) *cobra.Command) { commandFactories = append(commandFactories, f) }

func newRootCommand(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "airlock",
		Short:         "Declarative Docker sandboxes from sandbox.toml",
		Long:          "airlock turns the sandbox.toml of a project into a Docker sandbox: an interactive shell (airlock up)\nor a CI job (airlock run -- CMD), with sidecar daemons and service containers running beside it.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if _, err := userconfig.ParseLogLevel(a.opts.logLevel); err != nil {
				return withCode(ExitUsage, fmt.Errorf("invalid --log-level: %w", err))
			}
			a.opts.logLevelSet = cmd.Flags().Changed("log-level")
			a.opts.backendSet = cmd.Flags().Changed("backend")
			return a.checkBackendFlag()
		},
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	pf := root.PersistentFlags()
	pf.BoolVarP(&a.opts.quiet, "quiet", "q", false, "print less: no progress, no shutdown lines")
	pf.StringVar(&a.opts.file, "file", "", "path of the sandbox.toml to use (default: the nearest one above the current directory, or above --project)")
	pf.StringVar(&a.opts.project, "project", "", "the project dir: what the sandbox sees and starts in, where relative paths start (default: the folder of the sandbox.toml)")
	pf.StringVar(&a.opts.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	pf.StringVarP(&a.opts.host, "host", "H", "", "the daemon to use: unix:///path, tcp://host:port, https://host:port or ssh://[user@]host[:port] (default: "+hostEnv+", else this user's local daemon)")
	pf.StringVar(&a.opts.remoteCommand, "remote-command", "", "the airlock an ssh:// host runs, a name or a path there (default: "+remoteCommandEnv+", else remote.command of config.toml, else this build from the remote's cache, else airlock on its PATH)")
	pf.BoolVar(&a.opts.install, "install", false, "install this build on an ssh:// host that has no airlock or another build (as airlock remote install does)")
	pf.StringVar(&a.opts.backend, "backend", "", "where sandboxes run: docker or kubernetes (default: "+backendEnv+", else runtime.backend of config.toml, else docker)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withCode(ExitUsage, fmt.Errorf("%w\nSee '%s --help'.", err, c.CommandPath()))
	})
	for _, f := range commandFactories {
		root.AddCommand(f(a))
	}
	return root
}

// Main runs airlock with args and returns the process exit code.
func Main(args []string, o Options) int {
	return runWith(o, args, os.Stdin, os.Stdout, os.Stderr, os.LookupEnv)
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) (string, bool)) int {
	return runWith(Options{}, args, stdin, stdout, stderr, getenv)
}

func runWith(o Options, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) (string, bool)) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, redactor: secrets.NewRedactor(), daemonMain: o.RunDaemon}
	a.steps.mark("init")
	root := newRootCommand(a)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			printError(a.redactor.Writer(stderr), ee.Err)
		}
		return ee.Code
	}
	printError(a.redactor.Writer(stderr), err)
	if exitcode.IsUsage(err) {
		return ExitUsage
	}
	return ExitFailure
}

func printError(w io.Writer, err error) {
	// An error may carry text from inside a sandbox (a reason it reported):
	// its control characters are shown, not sent to the terminal.
	msg := termsafe.Text(err.Error())
	if !strings.HasPrefix(msg, "config error:") {
		msg = "airlock: " + msg
	}
	fmt.Fprintln(w, msg)
}
