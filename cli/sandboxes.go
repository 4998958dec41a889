package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/airlock-dev/airlock/manifest"
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
func (a *app) projectSandbox(ctx context.Context, rt *sandbox.Runtime) (*sandbox.Info, error) {
	dir, err := a.projectDir()
	if err != nil {
		return nil, err
	}
	list, err := rt.List(ctx, map[string]string{sandbox.LabelProject: dir, sandbox.LabelKind: sandbox.KindUp}, true)
	if err != nil {
		return nil, sandboxError(err)
	}
	if len(list) == 0 {
		return nil, nil
	}
	return &list[len(list)-1], nil
}

// targets resolves the sandboxes a lifecycle command acts on: the named one, every
// one matching all labels, or the project's.
func (a *app) targets(ctx context.Context, rt *sandbox.Runtime, args []string, labelFlags []string) ([]sandbox.Info, error) {
	if len(labelFlags) > 0 {
		if len(args) > 0 {
			return nil, withCode(ExitUsage, fmt.Errorf("give a sandbox or --label, not both"))
		}
		labels, err := parseLabels(labelFlags)
		if err != nil {
			return nil, err
		}
		list, err := rt.List(ctx, labels, true)
		return list, sandboxError(err)
	}
	if len(args) > 0 {
		in, err := rt.Get(ctx, args[0])
		if err != nil {
			return nil, sandboxError(err)
		}
		return []sandbox.Info{*in}, nil
	}
	in, err := a.projectSandbox(ctx, rt)
	if err != nil {
		return nil, err
	}
	if in == nil {
		dir, _ := a.projectDir()
		return nil, withCode(ExitFailure, fmt.Errorf("no sandbox for the project %s (start one with `airlock up`)", dir))
	}
	return []sandbox.Info{*in}, nil
}

// resolvedFor loads the manifest of a sandbox's project (for starting it again).
func (a *app) resolvedFor(project string) (*manifest.Resolved, error) {
	saved := a.opts.file
	if saved == "" {
		a.opts.file = filepath.Join(project, manifest.FileName)
		defer func() { a.opts.file = "" }()
	}
	return a.loadManifest()
}
