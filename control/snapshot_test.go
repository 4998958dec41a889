package control_test

import (
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/clitest"
)

// snapshotManifest is a sandbox with a service whose environment has a value
// from the caller's environment (a secret).
const snapshotManifest = `
[sandbox]
image = "{{image}}"

[services.side]
image = "{{image}}"
command = ["sh", "-c", "exec sleep 300"]
env = { SIDE_PW = "${SNAP_PW}" }
`

const snapSecret = "s3cr3t-snap-value-93f1"

// dockerOut runs docker with args and returns its output.
func dockerOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// serviceContainer is the container of service name of sandbox id.
func serviceContainer(t *testing.T, id, name string) string {
	t.Helper()
	return dockerOut(t, "ps", "-q", "--filter", "label=dev.airlock.sandbox="+id, "--filter", "label=dev.airlock.service="+name)
}

func readSandboxFile(ctx context.Context, c *client.Client, id, p string) (string, error) {
	rc, err := c.ReadFile(ctx, id, p)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// TestSnapshotCreateAndFork: a snapshot holds the primary's and the service's
// files and no secret value (in its images' labels or configuration); a
// sandbox created from it sees those files; a fork's copies are independent of
// each other and of the original; a snapshot in use cannot be deleted, and
// deleting it once unused leaves no image behind.
func TestSnapshotCreateAndFork(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeManifest(snapshotManifest)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 4*time.Minute)
	wm, secrets := clitest.WireManifest(t, e.project, func(k string) (string, bool) {
		if k == "SNAP_PW" {
			return snapSecret, true
		}
		return "", false
	})
	sb, err := c.Create(ctx, &client.CreateRequest{Kind: "up", Manifest: wm, Secrets: secrets, Start: true})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, sb.ID)
	if err := c.WriteFile(ctx, sb.ID, "/home/snap.txt", strings.NewReader("from-the-original"), 0o644); err != nil {
		t.Fatal(err)
	}
	side := serviceContainer(t, sb.ID, "side")
	dockerOut(t, "exec", side, "sh", "-c", "echo side-file > /srv-snap.txt")

	name := uniq("snaptest")
	snap, err := c.TakeSnapshot(ctx, sb.ID, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.DeleteSnapshot(context.Background(), name) })
	if snap.Name != name || snap.Sandbox != sb.ID || snap.Primary.Image == "" || len(snap.Services) != 1 || snap.Services[0].Service != "side" {
		t.Fatalf("snapshot: %+v", snap)
	}
	if _, err := c.TakeSnapshot(ctx, sb.ID, name); apiReason(err) != client.ReasonSnapshotExists {
		t.Errorf("a second snapshot of the same name: %v, want %s", err, client.ReasonSnapshotExists)
	}
	if _, err := c.TakeSnapshot(ctx, sb.ID, "Bad Name"); apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("a snapshot named \"Bad Name\": %v, want %s", err, client.ReasonInvalidRequest)
	}
	// No secret value in the images' configuration (labels, env, all of it).
	for _, im := range append([]client.SnapshotImage{snap.Primary}, snap.Services...) {
		cfg := dockerOut(t, "image", "inspect", "--format", "{{json .Config}}", im.Image)
		if strings.Contains(cfg, snapSecret) {
			t.Errorf("image %s holds the secret value: %s", im.Image, cfg)
		}
		if h := dockerOut(t, "history", "--no-trunc", im.Image); strings.Contains(h, snapSecret) {
			t.Errorf("the history of image %s holds the secret value", im.Image)
		}
		if strings.Contains(cfg, sb.ID) && !strings.Contains(cfg, `"dev.airlock.snapshot.sandbox":"`+sb.ID) {
			t.Errorf("image %s carries the sandbox's labels: %s", im.Image, cfg)
		}
	}
	list, err := c.Snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range list {
		if s.Name == name {
			found = true
			b, _ := json.Marshal(s)
			if strings.Contains(string(b), snapSecret) {
				t.Errorf("the snapshot's listing holds the secret value: %s", b)
			}
		}
	}
	if !found {
		t.Fatalf("GET /v1/snapshots does not list %s: %+v", name, list)
	}

	// A create from it without the value it needs is refused, naming it.
	if _, err := c.Create(ctx, &client.CreateRequest{Kind: "up", FromSnapshot: name, Start: true}); apiReason(err) != client.ReasonInvalidRequest || !strings.Contains(err.Error(), "services.side.env.SIDE_PW") {
		t.Errorf("a create from the snapshot without its values: %v", err)
	}
	if _, err := c.Create(ctx, &client.CreateRequest{Kind: "up", FromSnapshot: "no-such-snap", Start: true}); apiReason(err) != client.ReasonSnapshotNotFound {
		t.Errorf("a create from a missing snapshot: %v", err)
	}
	from, err := c.Create(ctx, &client.CreateRequest{Kind: "up", FromSnapshot: name, Secrets: secrets, Start: true})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, from.ID)
	if got, err := readSandboxFile(ctx, c, from.ID, "/home/snap.txt"); err != nil || got != "from-the-original" {
		t.Errorf("the primary of a sandbox from the snapshot: %q %v", got, err)
	}
	side2 := serviceContainer(t, from.ID, "side")
	if got := dockerOut(t, "exec", side2, "cat", "/srv-snap.txt"); got != "side-file" {
		t.Errorf("its service: %q", got)
	}
	if got := dockerOut(t, "exec", side2, "sh", "-c", "tr '\\0' '\\n' < /proc/1/environ | grep ^SIDE_PW="); got != "SIDE_PW="+snapSecret {
		t.Errorf("its service's main process has %q, want the value given", got)
	}
	if _, err := c.DeleteSnapshot(ctx, name); apiReason(err) != client.ReasonSnapshotInUse {
		t.Errorf("deleting a snapshot in use: %v, want %s", err, client.ReasonSnapshotInUse)
	}

	// Fork: 3 copies, each independent.
	fk, err := c.Fork(ctx, sb.ID, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.DeleteSnapshot(context.Background(), fk.Snapshot.Name) })
	if len(fk.Sandboxes) != 3 {
		t.Fatalf("fork -n 3 made %d", len(fk.Sandboxes))
	}
	for i, f := range fk.Sandboxes {
		waitReady(t, c, f.ID)
		if err := c.WriteFile(ctx, f.ID, "/home/own.txt", strings.NewReader(f.ID), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, _ := readSandboxFile(ctx, c, f.ID, "/home/snap.txt"); got != "from-the-original" {
			t.Errorf("copy %d lacks the original's file: %q", i, got)
		}
	}
	for _, f := range append(fk.Sandboxes, *sb) {
		got, err := readSandboxFile(ctx, c, f.ID, "/home/own.txt")
		if f.ID == sb.ID {
			if err == nil {
				t.Errorf("the original sees a file a copy wrote: %q", got)
			}
			continue
		}
		if got != f.ID {
			t.Errorf("copy %s reads %q from its own file, want its own ID (%v)", f.ID, got, err)
		}
	}
	if _, err := c.Fork(ctx, sb.ID, 0); apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("fork -n 0: %v", err)
	}

	for _, f := range append(fk.Sandboxes, *from, *sb) {
		if _, err := c.Delete(ctx, f.ID); err != nil {
			t.Fatal(err)
		}
		waitState(t, c, f.ID, time.Minute, client.StateDeleted)
	}
	for _, n := range []string{name, fk.Snapshot.Name} {
		if _, err := c.DeleteSnapshot(ctx, n); err != nil {
			t.Errorf("delete snapshot %s: %v", n, err)
		}
	}
	if left := dockerOut(t, "images", "-q", "--filter", "label=dev.airlock.snapshot="+name); left != "" {
		t.Errorf("images of a deleted snapshot remain: %s", left)
	}
	if _, err := c.DeleteSnapshot(ctx, name); apiReason(err) != client.ReasonSnapshotNotFound {
		t.Errorf("deleting it again: %v", err)
	}
}
