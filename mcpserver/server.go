// Package mcpserver serves the daemon's API as MCP tools and resources: an
// MCP host (an agent's platform, an editor) creates sandboxes, runs commands
// and moves files through the same routes as the CLI, so the daemon's rules
// (egress, trust, bounds, secrets kept out of what it answers) hold for it
// too. `airlock mcp` runs it over stdio; the daemon serves it over streamable
// HTTP at /v1/mcp on its listeners (docs/mcp.md).
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/termsafe"
)

// Path is where the daemon serves the MCP server over streamable HTTP.
const Path = "/v1/mcp"

// Options make a server.
type Options struct {
	// Client is the daemon every tool call goes to.
	Client *client.Client
	// Version is airlock's, shown to MCP clients.
	Version string
	// ProjectsHere says a project_dir given to create_sandbox is on this
	// machine as well as on the daemon's: its sandbox.toml is read here. A
	// server in front of a daemon on another machine (-H) refuses one.
	ProjectsHere bool
}

// server holds what the tools share.
type server struct {
	c            *client.Client
	projectsHere bool
}

// New returns the MCP server: its tools and resource templates, each call
// one or more requests to the daemon of o.Client.
func New(o Options) *mcp.Server {
	version := o.Version
	if version == "" {
		version = "dev"
	}
	s := &server{c: o.Client, projectsHere: o.ProjectsHere}
	srv := mcp.NewServer(&mcp.Implementation{Name: "airlock", Title: "airlock sandboxes", Version: version}, &mcp.ServerOptions{
		Instructions: "airlock runs sandboxes (containers made from a sandbox.toml manifest) through its control daemon. " +
			"Create one with create_sandbox, run commands in it with run_command (or start_command and read_command_output " +
			"for long ones), move files with read_file, write_file and list_files, and delete it with delete_sandbox when done. " +
			"Outputs are cut at 64 KiB per stream, with a note saying how much.",
	})
	s.addSandboxTools(srv)
	s.addExecTools(srv)
	s.addFileTools(srv)
	s.addResources(srv)
	return srv
}

// Handler serves srv over streamable HTTP, stateless (every tool call stands
// alone: sandbox and exec IDs are the state) with JSON answers, so that it
// works through any listener of the daemon, behind its authentication.
func Handler(srv *mcp.Server) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
}

// toolError is the text of a failed call, for the model to read: what could
// not be done, then the daemon's own words (which never hold a secret value:
// the daemon redacts them), escaped.
func toolError(what string, err error) error {
	msg := err.Error()
	var ae *client.Error
	if errors.As(err, &ae) && ae.Message != "" {
		msg = ae.Message
		if ae.Reason != "" {
			msg += " (" + ae.Reason + ")"
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "the time allowed ran out: " + msg
	}
	return fmt.Errorf("cannot %s: %s", what, termsafe.Text(msg))
}

// argError is a call's input the server refuses before asking the daemon.
func argError(what, format string, args ...any) error {
	return fmt.Errorf("cannot %s: %s", what, fmt.Sprintf(format, args...))
}

// need refuses an empty required string.
func need(what, name, v string) error {
	if strings.TrimSpace(v) == "" {
		return argError(what, "%s is required", name)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
