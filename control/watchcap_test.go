package control_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control"
)

// TestFileWatchCap: a sandbox has at most control.MaxFileWatches watches open
// at once; the next is refused (429 too_many_watches, naming the cap) until
// one closes, and a refused or failed watch takes no place. Once every client
// went away no watcher is left in the sandbox.
func TestFileWatchCap(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeManifest(filesManifest)
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: binA, BuildID: buildA, Getenv: e.getenv, Owner: randHex(16)}
	c := startInProcessConfig(t, e, rt, control.Config{IdleTTL: time.Hour, ReapInterval: 100 * time.Millisecond, OutputMax: filesMax})
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID
	other := e.createReady(ctx, c, "").ID
	fsExec(t, ctx, c, id, "mkdir -p /tmp/w")
	fsExec(t, ctx, c, other, "mkdir -p /tmp/w")

	// A failed watch (no such directory) gives its place back at once.
	for range control.MaxFileWatches + 1 {
		_, err := c.WatchFiles(ctx, id, "/tmp/none", client.WatchOptions{})
		wantErr(t, "a missing path", err, http.StatusNotFound, client.ReasonPathNotFound, "/tmp/none")
	}
	var open []*client.FileWatch
	defer func() {
		for _, w := range open {
			w.Close()
		}
	}()
	for range control.MaxFileWatches {
		w, err := c.WatchFiles(ctx, id, "/tmp/w", client.WatchOptions{})
		if err != nil {
			t.Fatalf("watch %d of %d: %v", len(open)+1, control.MaxFileWatches, err)
		}
		open = append(open, w)
		nextEvents(t, w, 1, 10*time.Second)
	}
	_, err := c.WatchFiles(ctx, id, "/tmp/w", client.WatchOptions{})
	wantErr(t, "a watch past the cap", err, http.StatusTooManyRequests, client.ReasonTooManyWatches, id, strconv.Itoa(control.MaxFileWatches))
	// Another sandbox has places of its own.
	w, err := c.WatchFiles(ctx, other, "/tmp/w", client.WatchOptions{})
	if err != nil {
		t.Fatalf("a watch of another sandbox: %v", err)
	}
	nextEvents(t, w, 1, 10*time.Second)
	w.Close()

	// One closed: its place comes free once the daemon saw its client go.
	open[0].Close()
	open = open[1:]
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, err := c.WatchFiles(ctx, id, "/tmp/w", client.WatchOptions{})
		if err == nil {
			open = append(open, w)
			nextEvents(t, w, 1, 10*time.Second)
			break
		}
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Reason != client.ReasonTooManyWatches || time.Now().After(deadline) {
			t.Fatalf("a watch after one closed: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, err = c.WatchFiles(ctx, id, "/tmp/w", client.WatchOptions{})
	wantErr(t, "a watch past the cap again", err, http.StatusTooManyRequests, client.ReasonTooManyWatches)

	for _, w := range open {
		w.Close()
	}
	open = nil
	for _, sb := range []string{id, other} {
		deadline := time.Now().Add(10 * time.Second)
		for left := watchers(t, ctx, c, sb); left != ""; left = watchers(t, ctx, c, sb) {
			if time.Now().After(deadline) {
				t.Fatalf("watchers left in sandbox %s after their clients went away: %s", sb, left)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// Every place is free again.
	for range control.MaxFileWatches {
		deadline := time.Now().Add(10 * time.Second)
		for {
			w, err := c.WatchFiles(ctx, id, "/tmp/w", client.WatchOptions{})
			if err == nil {
				open = append(open, w)
				break
			}
			if apiReason(err) != client.ReasonTooManyWatches || time.Now().After(deadline) {
				t.Fatalf("watch %d after every watch closed: %v", len(open)+1, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
