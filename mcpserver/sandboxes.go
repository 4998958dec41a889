package mcpserver

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/termsafe"
	"github.com/airlock-dev/airlock/manifest"
)

// SandboxInfo is a sandbox as a result shows it: its record, every string
// escaped. It holds no manifest and no environment, so no secret value.
type SandboxInfo struct {
	ID          string            `json:"id"`
	State       string            `json:"state"`
	Kind        string            `json:"kind"`
	Project     string            `json:"project,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	CreatedAt   string            `json:"created_at"`
	Reason      string            `json:"reason,omitempty" jsonschema:"why it failed or stopped"`
	DaemonsUp   int               `json:"daemons_up"`
	Daemons     []string          `json:"daemons,omitempty" jsonschema:"its daemons' names (their logs are resources)"`
	Ports       []string          `json:"ports,omitempty" jsonschema:"published ports, host:port->port/protocol"`
	ExpiresAt   string            `json:"expires_at,omitempty"`
	IdleTimeout float64           `json:"idle_timeout_seconds,omitempty"`
}

func infoOf(sb *client.Sandbox) SandboxInfo {
	in := SandboxInfo{
		ID: termsafe.Line(sb.ID), State: termsafe.Line(sb.State), Kind: termsafe.Line(sb.Kind),
		Project: termsafe.Line(sb.Project), CreatedAt: sb.CreatedAt.UTC().Format(time.RFC3339),
		Reason: termsafe.Text(sb.Reason), DaemonsUp: sb.Daemons.Up, IdleTimeout: sb.IdleTimeout,
	}
	if len(sb.Labels) > 0 {
		in.Labels = map[string]string{}
		for k, v := range sb.Labels {
			in.Labels[termsafe.Line(k)] = termsafe.Line(v)
		}
	}
	for _, d := range sb.DaemonNames {
		in.Daemons = append(in.Daemons, termsafe.Line(d))
	}
	for _, p := range sb.Ports {
		in.Ports = append(in.Ports, termsafe.Line(p.String()))
	}
	if sb.ExpiresAt != nil {
		in.ExpiresAt = sb.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return in
}

// CreateInput is create_sandbox's input.
type CreateInput struct {
	Manifest    string            `json:"manifest,omitempty" jsonschema:"the manifest: a sandbox.toml's text (TOML); built-in presets by name; without project_dir the sandbox gets an empty project of its own"`
	ProjectDir  string            `json:"project_dir,omitempty" jsonschema:"an absolute project directory on the daemon's machine; without manifest its sandbox.toml is used"`
	Vars        map[string]string `json:"vars,omitempty" jsonschema:"values of the manifest's ${NAME}s (nothing else is read: no environment, no vault)"`
	ID          string            `json:"id,omitempty" jsonschema:"the sandbox's ID (default: one made up)"`
	Labels      map[string]string `json:"labels,omitempty"`
	WaitSeconds float64           `json:"wait_seconds,omitempty" jsonschema:"how long to wait for it to be ready (default 300); a sandbox that fails or does not get ready in time is deleted"`
	Timeout     float64           `json:"timeout_seconds,omitempty" jsonschema:"its lifetime: deleted this many seconds after it was made (default: none)"`
	IdleTimeout float64           `json:"idle_timeout_seconds,omitempty" jsonschema:"deleted once idle (no exec running) this many seconds (default: the daemon's idle rule, which stops it)"`
}

// ListInput is list_sandboxes' input.
type ListInput struct {
	Labels map[string]string `json:"labels,omitempty" jsonschema:"only sandboxes with all these labels"`
	All    bool              `json:"all,omitempty" jsonschema:"include stopped and failed sandboxes"`
}

// ListOutput is list_sandboxes' result.
type ListOutput struct {
	Sandboxes []SandboxInfo `json:"sandboxes"`
}

// SandboxInput names a sandbox.
type SandboxInput struct {
	SandboxID string `json:"sandbox_id"`
}

const defaultCreateWait = 300 * time.Second

func (s *server) addSandboxTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{
		Name:  "create_sandbox",
		Title: "Create a sandbox",
		Description: "Create a sandbox from a manifest (a sandbox.toml's text) or a project directory's sandbox.toml, start it " +
			"and wait until it is ready (its daemons ready). Returns the sandbox (id, state, daemons, ports).",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(true)},
	}, s.create)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "list_sandboxes",
		Title:       "List sandboxes",
		Description: "List the daemon's sandboxes: pending, ready and paused ones (with all, stopped and failed ones too).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.list)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "delete_sandbox",
		Title:       "Delete a sandbox",
		Description: "Stop and remove a sandbox, with everything it made; returns once it is deleted.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true},
	}, s.delete)
}

func (s *server) create(ctx context.Context, _ *mcp.CallToolRequest, in CreateInput) (*mcp.CallToolResult, SandboxInfo, error) {
	const what = "create the sandbox"
	req := &client.CreateRequest{
		ID: in.ID, Kind: client.KindUp, Start: true, Labels: in.Labels,
		ManifestSource:  client.ManifestSource{ManifestTOML: in.Manifest, ProjectDir: in.ProjectDir, Vars: in.Vars},
		LifetimeRequest: client.LifetimeRequest{Timeout: in.Timeout, IdleTimeout: in.IdleTimeout},
	}
	if in.Manifest == "" {
		if in.ProjectDir == "" {
			return nil, SandboxInfo{}, argError(what, "give a manifest (a sandbox.toml's text) or a project_dir")
		}
		if !s.projectsHere {
			return nil, SandboxInfo{}, argError(what, "the daemon is on another machine: give the manifest's text (manifest), with project_dir a directory on that machine")
		}
		if !filepath.IsAbs(in.ProjectDir) {
			return nil, SandboxInfo{}, argError(what, "project_dir %q is not an absolute path", in.ProjectDir)
		}
		b, err := manifest.ReadLayer(filepath.Join(in.ProjectDir, manifest.FileName))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, SandboxInfo{}, argError(what, "%s has no %s", in.ProjectDir, manifest.FileName)
		}
		if err != nil {
			return nil, SandboxInfo{}, toolError(what, err)
		}
		req.ManifestTOML = string(b)
	}
	sb, err := s.c.Create(ctx, req)
	if err != nil {
		return nil, SandboxInfo{}, toolError(what, err)
	}
	wait := defaultCreateWait
	if in.WaitSeconds > 0 {
		wait = time.Duration(in.WaitSeconds * float64(time.Second))
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	got, _, err := s.c.WaitState(wctx, sb.ID, client.StateReady, client.StateFailed, client.StateStopped, client.StateDeleting, client.StateDeleted)
	if err == nil && got.State == client.StateReady {
		if now, gerr := s.c.Get(ctx, sb.ID); gerr == nil {
			got = now // its daemons and ports as they are now
		}
		return nil, infoOf(got), nil
	}
	// Not ready: say why, and leave nothing behind.
	var why string
	switch {
	case err == nil && got.State == client.StateFailed:
		why = "it failed"
	case err == nil:
		why = "it is " + got.State
	case wctx.Err() != nil && ctx.Err() == nil:
		why = "it was not ready within " + wait.String()
	default:
		why = "cannot follow its start: " + err.Error()
	}
	if err == nil && got.Reason != "" {
		why += ": " + got.Reason
	}
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer dcancel()
	if _, derr := s.c.Delete(dctx, sb.ID); derr == nil {
		why += " (deleted)"
	}
	return nil, SandboxInfo{}, toolError(what+" "+sb.ID, errors.New(why))
}

func (s *server) list(ctx context.Context, _ *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, ListOutput, error) {
	list, err := s.c.List(ctx, in.Labels)
	if err != nil {
		return nil, ListOutput{}, toolError("list the sandboxes", err)
	}
	out := ListOutput{Sandboxes: []SandboxInfo{}}
	for i := range list {
		switch list[i].State {
		case client.StateDeleting, client.StateDeleted:
			continue
		case client.StatePending, client.StateReady, client.StatePaused:
		default:
			if !in.All {
				continue
			}
		}
		out.Sandboxes = append(out.Sandboxes, infoOf(&list[i]))
	}
	return nil, out, nil
}

func (s *server) delete(ctx context.Context, _ *mcp.CallToolRequest, in SandboxInput) (*mcp.CallToolResult, SandboxInfo, error) {
	what := "delete the sandbox " + termsafe.Line(in.SandboxID)
	if err := need(what, "sandbox_id", in.SandboxID); err != nil {
		return nil, SandboxInfo{}, err
	}
	sb, err := s.c.Delete(ctx, in.SandboxID)
	if err != nil {
		return nil, SandboxInfo{}, toolError(what, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if got, _, err := s.c.WaitState(wctx, in.SandboxID, client.StateDeleted); err == nil {
		sb = got
	} else if !errors.Is(err, client.ErrSandboxNotFound) {
		return nil, SandboxInfo{}, toolError(what+" (its removal was accepted)", err)
	} else {
		sb.State = client.StateDeleted
	}
	return nil, infoOf(sb), nil
}
