package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
)

// copier copies files into a created sandbox's container through the Engine's
// archive API: the Engine, and the host environment (~ in [copies] sources).
type copier struct {
	engine client.APIClient
	getenv func(string) (string, bool)
}

// copyIn copies every [copies] entry into the created (not yet started) container
// through the Engine API, owned by the sandbox user. The archive is streamed, never
// held in memory or written to disk.
func (c copier) copyIn(ctx context.Context, containerID string, r *manifest.Resolved, u sandboxUser) error {
	for _, name := range slices.Sorted(maps.Keys(r.Copies)) {
		cp := r.Copies[name]
		src, err := projectfs.CopySource(r, name, lookupEnv(c.getenv, "HOME"))
		if err != nil {
			return err
		}
		target := strings.TrimPrefix(path.Clean(projectfs.InHome(cp.Target, u.Home)), "/")
		pr, pw := io.Pipe()
		go func() {
			pw.CloseWithError(projectfs.WriteTree(pw, src, target, cp.Exclude, u.UID, u.GID))
		}()
		err = copyTo(ctx, c.engine, containerID, "/", pr, container.CopyToContainerOptions{AllowOverwriteDirWithFile: true})
		pr.CloseWithError(err)
		if err != nil {
			return failed("cannot copy copies.%s (%s) into the sandbox: %v", name, src, err)
		}
	}
	return nil
}

// uploadState writes the spec and the sandbox user's empty state folder into a
// created container (for a sandbox user who could not make the folder itself).
func (c copier) uploadState(ctx context.Context, containerID string, b []byte, u sandboxUser) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	entries := []struct {
		name     string
		mode     int64
		uid, gid int
		data     []byte
		dir      bool
	}{
		{name: "airlock/", mode: 0o755, dir: true},
		{name: "airlock/spec.json", mode: 0o444, data: b},
		{name: "airlock/state/", mode: 0o755, uid: u.UID, gid: u.GID, dir: true},
		{name: "airlock/state/daemons/", mode: 0o755, uid: u.UID, gid: u.GID, dir: true},
		{name: "airlock/state/status.jsonl", mode: 0o644, uid: u.UID, gid: u.GID, data: []byte{}},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: now, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return failed("cannot write the sandbox state: %v", err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return failed("cannot write the sandbox state: %v", err)
		}
	}
	if err := tw.Close(); err != nil {
		return failed("cannot write the sandbox state: %v", err)
	}
	if err := copyTo(ctx, c.engine, containerID, "/", &buf, container.CopyToContainerOptions{AllowOverwriteDirWithFile: true}); err != nil {
		return failed("cannot upload the supervisor spec into the sandbox: %v", err)
	}
	return nil
}
