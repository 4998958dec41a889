package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"

	"github.com/airlock-dev/airlock/test/testenv"
)

// TestPruneCommand: `airlock prune` through the binary, with a kept run of a built
// image past a short runtime.event_retention_ttl and a supervisor volume of
// another build: --dry-run lists and removes nothing; prune --all removes the
// kept run, its image and the volume, prints a line each and the space freed,
// and leaves another daemon's volume alone.
func TestPruneCommand(t *testing.T) {
	limit(t)
	e := newEnv(t, "[sandbox]\nnetwork = \"none\"\n\n[sandbox.build]\ncontext = \".\"\n")
	e.WriteFile("Dockerfile", "FROM "+e.Image+"\nCOPY marker /marker\n")
	e.WriteFile("marker", uniq("marker"))
	if err := os.MkdirAll(filepath.Join(e.Config, "airlock"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Config, "airlock", "config.toml"), []byte("[runtime]\nevent_retention_ttl = \"1s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id := uniq("prune-kept")
	e.MustRun("run", "--keep", "--id", id, "--", "true")
	kept := time.Now()
	keyb, err := os.ReadFile(filepath.Join(e.Data, "airlock", "daemon", "owner-key"))
	if err != nil {
		t.Fatal(err)
	}
	owner := strings.TrimSpace(string(keyb))
	ctx := context.Background()
	images, err := e.Cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "dev.airlock.owner="+owner))})
	if err != nil || len(images) != 1 || len(images[0].RepoTags) != 1 {
		t.Fatalf("want one built image of this daemon, got %+v %v", images, err)
	}
	tag := images[0].RepoTags[0]
	t.Cleanup(func() { _ = testenv.RemoveImage(context.Background(), e.Cli, images[0].ID) })
	mine := supervisorFixture(t, e, owner)
	theirs := supervisorFixture(t, e, randomKey())

	// The run was kept for longer than the retention (1 s).
	time.Sleep(time.Until(kept.Add(1100 * time.Millisecond)))
	r := e.MustRun("prune", "--dry-run")
	contains(t, "prune --dry-run", r.Stdout, "would remove sandbox "+id+"\n", "would remove volume "+mine+"\n", "Total reclaimable space: ")
	if strings.Contains(r.Stdout, "image") || strings.Contains(r.Stdout, theirs) {
		t.Errorf("prune --dry-run lists the newest image or another daemon's volume:\n%s", r)
	}
	if _, err := e.Cli.VolumeInspect(ctx, mine); err != nil {
		t.Fatalf("prune --dry-run removed volume %s: %v", mine, err)
	}
	contains(t, "ps -a after the dry run", e.MustRun("ps", "-a").Stdout, id)

	r = e.MustRun("prune", "--all")
	t.Logf("airlock prune --all:\n%s", r.Stdout)
	contains(t, "prune --all", r.Stdout, "removed sandbox "+id+"\n", "removed image "+tag+"\n", "removed volume "+mine+"\n", "Total reclaimed space: ")
	if strings.Contains(r.Stdout, theirs) || strings.Contains(r.Stdout, "Total reclaimed space: 0B") {
		t.Errorf("prune --all:\n%s", r)
	}
	if _, err := e.Cli.VolumeInspect(ctx, mine); !cerrdefs.IsNotFound(err) {
		t.Errorf("volume %s of another build is still there: %v", mine, err)
	}
	for _, v := range []string{theirs, theirs + "-ok"} {
		if _, err := e.Cli.VolumeInspect(ctx, v); err != nil {
			t.Errorf("another daemon's volume %s is gone: %v", v, err)
		}
	}
	if _, err := e.Cli.ImageInspect(ctx, tag); !cerrdefs.IsNotFound(err) {
		t.Errorf("image %s is still there: %v", tag, err)
	}
	if out := e.MustRun("ps", "-a").Stdout; strings.Contains(out, id) {
		t.Errorf("ps -a still lists the pruned sandbox:\n%s", out)
	}
	r = e.MustRun("prune")
	if strings.TrimSpace(r.Stdout) != "Total reclaimed space: 0B" {
		t.Errorf("a second prune: want nothing removed, got\n%s", r)
	}
}

// supervisorFixture makes a supervisor volume of a made-up build and its -ok
// companion, labelled with owner, removed when the test ends.
func supervisorFixture(t *testing.T, e *env, owner string) string {
	t.Helper()
	key := randomKey()[:16]
	name := "airlock-supervisor-" + key
	for _, n := range []string{name, name + "-ok"} {
		_, err := e.Cli.VolumeCreate(context.Background(), volume.CreateOptions{Name: n,
			Labels: map[string]string{"dev.airlock.supervisor": key, "dev.airlock.owner": owner}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Cli.VolumeRemove(context.Background(), n, true) })
	}
	return name
}

func randomKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
