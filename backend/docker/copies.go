package docker

import (
	"context"
	"io"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
)

// copyIn copies every [copies] entry into the created (not yet started) container
// through the Engine API, owned by the sandbox user. The archive is streamed, never
// held in memory or written to disk.
func (rt *Runtime) copyIn(ctx context.Context, containerID string, r *manifest.Resolved, u sandboxUser) error {
	for _, name := range slices.Sorted(maps.Keys(r.Copies)) {
		c := r.Copies[name]
		src, err := projectfs.CopySource(r, name, rt.getenv("HOME"))
		if err != nil {
			return err
		}
		target := strings.TrimPrefix(path.Clean(projectfs.InHome(c.Target, u.Home)), "/")
		pr, pw := io.Pipe()
		go func() {
			pw.CloseWithError(projectfs.WriteTree(pw, src, target, c.Exclude, u.UID, u.GID))
		}()
		err = rt.copyTo(ctx, containerID, "/", pr, container.CopyToContainerOptions{AllowOverwriteDirWithFile: true})
		pr.CloseWithError(err)
		if err != nil {
			return failed("cannot copy copies.%s (%s) into the sandbox: %v", name, src, err)
		}
	}
	return nil
}
