package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/mcpserver"
)

func init() { addCommand(newMCPCommand) }

func newMCPCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve the daemon's sandboxes to an MCP host over stdio (docs/mcp.md)",
		Long: "mcp is a Model Context Protocol server on stdin and stdout: an MCP host (an agent's platform, an editor) " +
			"creates sandboxes, runs commands, reads and writes files and reads events and logs through its tools and " +
			"resources, each call a request to the daemon's API (-H and AIRLOCK_HOST choose the daemon, as for every command). " +
			"The daemon serves the same server over streamable HTTP at " + mcpserver.Path + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer cancel()
			c, err := a.daemonClient(ctx)
			if err != nil {
				return err
			}
			srv := mcpserver.New(mcpserver.Options{Client: c, Version: Version, ProjectsHere: a.remoteHost() == ""})
			err = srv.Run(ctx, a.mcpTransport())
			if err == nil || errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil // the host closed stdin, or stopped us
			}
			return withCode(ExitAirlock, err)
		},
	}
}

// mcpTransport is stdio: the process's own (mcp.StdioTransport), or the
// streams the app was given.
func (a *app) mcpTransport() mcp.Transport {
	if a.stdin == os.Stdin && a.stdout == os.Stdout {
		return &mcp.StdioTransport{}
	}
	return &mcp.IOTransport{Reader: io.NopCloser(a.stdin), Writer: nopWriteCloser{a.stdout}}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
