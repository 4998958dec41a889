package control_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control"
)

// TestRemoveFiles: POST …/files/remove takes many paths in one request (one
// exec), files and directories, skips the missing ones with missing_ok and
// refuses what a single remove refuses.
func TestRemoveFiles(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeManifest(filesManifest)
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: binA, BuildID: buildA, Getenv: e.getenv, Owner: randHex(16)}
	c := startInProcessConfig(t, e, rt, control.Config{IdleTTL: time.Hour, ReapInterval: 100 * time.Millisecond, OutputMax: filesMax})
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID

	fsExec(t, ctx, c, id, `mkdir -p /tmp/r/d/e && cd /tmp/r && for i in $(seq 1 1500); do : > f$i; done && : > d/e/x && : > keep`)
	var paths []string
	for i := 1; i <= 1500; i++ {
		paths = append(paths, fmt.Sprintf("/tmp/r/f%d", i))
	}
	paths = append(paths, "/tmp/r/d", "/tmp/r/gone", "/tmp/r/gone/below")
	if err := c.RemoveFiles(ctx, id, &client.RemoveFilesRequest{Paths: paths, Recursive: true, MissingOK: true}); err != nil {
		t.Fatalf("remove of 1500 files, a directory and missing paths: %v", err)
	}
	if left := fsExec(t, ctx, c, id, `ls -A /tmp/r`); left != "keep\n" {
		t.Errorf("after the batched remove /tmp/r holds %q, want keep alone", left)
	}
	wantErr(t, "a missing path without missing_ok", c.RemoveFiles(ctx, id, &client.RemoveFilesRequest{Paths: []string{"/tmp/r/gone"}}), http.StatusNotFound, client.ReasonPathNotFound, "/tmp/r/gone")
	fsExec(t, ctx, c, id, `mkdir -p /tmp/r/full && : > /tmp/r/full/x`)
	wantErr(t, "a directory that holds files without recursive", c.RemoveFiles(ctx, id, &client.RemoveFilesRequest{Paths: []string{"/tmp/r/full"}}), http.StatusConflict, client.ReasonNotEmpty, "/tmp/r/full")
	wantErr(t, "remove of /", c.RemoveFiles(ctx, id, &client.RemoveFilesRequest{Paths: []string{"/tmp/r/keep", "/"}, Recursive: true}), http.StatusBadRequest, client.ReasonInvalidRequest, "paths[1]")
	wantErr(t, "a relative path", c.RemoveFiles(ctx, id, &client.RemoveFilesRequest{Paths: []string{"tmp/r/keep"}}), http.StatusBadRequest, client.ReasonInvalidRequest, "paths[0]")
	wantErr(t, "no path", c.RemoveFiles(ctx, id, &client.RemoveFilesRequest{}), http.StatusBadRequest, client.ReasonInvalidRequest, "paths")
	wantErr(t, "root's file", c.RemoveFiles(ctx, id, &client.RemoveFilesRequest{Paths: []string{"/etc/group"}}), http.StatusForbidden, client.ReasonPermissionDenied, "/etc/group")
	if left := fsExec(t, ctx, c, id, `ls -A /tmp/r`); !strings.Contains(left, "keep") {
		t.Errorf("a refused request removed a path: /tmp/r holds %q", left)
	}
}
