package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/sandbox"
)

// projectDir returns the directory of the project's sandbox.toml.
func (a *app) projectDir() (string, error) {
	f, err := a.manifestFile()
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(f)
	if err != nil {
		return "", err
	}
	return filepath.Dir(abs), nil
}

// projectSandbox returns the project's `up` sandbox, or nil when it has none.
func (a *app) projectSandbox(ctx context.Context, c *client.Client) (*client.Sandbox, error) {
	dir, err := a.projectDir()
	if err != nil {
		return nil, err
	}
	list, err := c.List(ctx, nil)
	if err != nil {
		return nil, apiFailure(err)
	}
	var found *client.Sandbox
	for i := range list {
		s := list[i]
		if s.Project == dir && s.Kind == sandbox.KindUp && s.State != client.StateDeleting {
			found = &s
		}
	}
	return found, nil
}

// targets resolves the sandboxes a lifecycle command acts on: the named one, every
// one matching all labels, or the project's.
func (a *app) targets(ctx context.Context, c *client.Client, args []string, labelFlags []string) ([]client.Sandbox, error) {
	if len(labelFlags) > 0 {
		if len(args) > 0 {
			return nil, withCode(ExitUsage, fmt.Errorf("give a sandbox or --label, not both"))
		}
		labels, err := parseLabels(labelFlags)
		if err != nil {
			return nil, err
		}
		list, err := c.List(ctx, labels)
		if err != nil {
			return nil, apiFailure(err)
		}
		return list, nil
	}
	if len(args) > 0 {
		sb, err := c.Get(ctx, args[0])
		if err != nil {
			return nil, apiFailure(err)
		}
		if sb.State == client.StateDeleted {
			return nil, withCode(ExitFailure, fmt.Errorf("sandbox %s was deleted", sb.ID))
		}
		return []client.Sandbox{*sb}, nil
	}
	sb, err := a.projectSandbox(ctx, c)
	if err != nil {
		return nil, err
	}
	if sb == nil {
		dir, _ := a.projectDir()
		return nil, withCode(ExitFailure, fmt.Errorf("no sandbox for the project %s (start one with `airlock up`)", dir))
	}
	return []client.Sandbox{*sb}, nil
}
