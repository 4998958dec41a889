package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/exitcode"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
)

// checkClientFiles refuses, before anything is made, what the CLI cannot write
// into a sandbox of a daemon on another machine: a [copies] target under ~
// (the sandbox user's home is known only inside).
func checkClientFiles(r *manifest.Resolved) error {
	for _, name := range slices.Sorted(maps.Keys(r.Copies)) {
		if t := r.Copies[name].Target; t == "~" || strings.HasPrefix(t, "~/") {
			return configError(fmt.Errorf("copies.%s.target: %s is under the sandbox user's home, which a daemon on another machine cannot be given yet: use an absolute target", manifest.KeyPath(name), t))
		}
	}
	return nil
}

// uploadFiles writes this machine's files into sandbox id, created with
// ClientFiles and not started: the project (when copied) and every [copies]
// entry, through the daemon's files API (PUT …/files, a tar stream each).
func (a *app) uploadFiles(ctx context.Context, c *client.Client, id string, r *manifest.Resolved, projectCopied bool) error {
	put := func(dir string, write func(io.Writer) error) error {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(write(pw)) }()
		err := c.WriteArchive(ctx, id, dir, pr)
		pr.CloseWithError(io.ErrClosedPipe)
		return err
	}
	if projectCopied && r.ProjectDir != "" {
		if err := put(path.Dir(r.ProjectDir), func(w io.Writer) error { return projectfs.WriteProjectTree(w, r.ProjectDir) }); err != nil {
			return uploadError("the project "+r.ProjectDir, err)
		}
	}
	home, _ := a.getenv("HOME")
	for _, name := range slices.Sorted(maps.Keys(r.Copies)) {
		target := path.Clean(r.Copies[name].Target)
		if err := put(path.Dir(target), func(w io.Writer) error { return projectfs.WriteCopyTree(w, r, name, home) }); err != nil {
			return uploadError("copies."+name, err)
		}
	}
	return nil
}

func uploadError(what string, err error) error {
	var se *exitcode.Coded
	if errors.As(err, &se) {
		return exitcode.OfSandbox(se) // a source here is missing, say
	}
	return withCode(ExitAirlock, fmt.Errorf("cannot copy %s into the sandbox: %w", what, apiFailure(err)))
}
