package control_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control"
	"github.com/airlock-dev/airlock/test/testenv"
)

const (
	labelOwner      = "dev.airlock.owner"
	labelSupervisor = "dev.airlock.supervisor"
)

// buildManifest is a run sandbox whose image is built from the project dir.
const buildManifest = `
[sandbox]
network = "none"

[sandbox.build]
context = "."
`

// TestPrune drives prune in a daemon in the test process (its clock moved past
// the retention) against the real Engine: two builds of one project, kept run
// sandboxes, supervisor volumes of this and other builds and objects of other
// owners. It removes only what it should, the dry run nothing.
func TestPrune(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t, 5*time.Minute)
	owner, theirs := randHex(16), randHex(16)
	// A copy of the binary of its own: its supervisor volume is made by this
	// test (so it carries this owner) and removed at the end.
	bin := filepath.Join(t.TempDir(), "airlock")
	testenv.CopyFile(t, binA, bin, 0o755)
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: bin, BuildID: buildA, Getenv: e.getenv, Owner: owner}
	c := startInProcess(t, e, rt)
	t.Cleanup(func() {
		for _, v := range ownedVolumes(t, e, owner) {
			_ = e.docker.VolumeRemove(context.Background(), v, true)
		}
	})

	// Two builds of the project, each used by a kept run. (The label keeps
	// its steps this run's: an Engine with the containerd image store can take
	// away a cached step of another test's build, as its prune may.)
	if err := os.WriteFile(filepath.Join(e.project, "Dockerfile"), []byte("FROM "+e.image+"\nLABEL dev.airlock.test-nonce="+randHex(8)+"\nCOPY marker /marker\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.writeManifest(buildManifest)
	writeMarker := func(s string) {
		if err := os.WriteFile(filepath.Join(e.project, "marker"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	keptRun := func(id string) *client.Sandbox {
		wm, secrets := e.wire()
		if _, err := c.Create(ctx, &client.CreateRequest{ID: id, Kind: "run", Manifest: wm, Secrets: secrets, Command: []string{"true"}, Start: true}); err != nil {
			t.Fatal(err)
		}
		sb, ev := waitState(t, c, id, 2*time.Minute, client.StateStopped, client.StateFailed)
		if sb.State != client.StateStopped {
			t.Fatalf("kept run %s is %s (%s)\n%s", id, sb.State, ev.Reason, dumpEvents(c, id))
		}
		got, err := c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	writeMarker("one")
	runA := keptRun(uniq("prune-a"))
	writeMarker("two")
	runB := keptRun(uniq("prune-b"))
	built := ownedImages(t, e, owner)
	if len(built) != 2 {
		t.Fatalf("want 2 built images of owner %s, got %v", owner, built)
	}
	imgA, imgB := imageOf(t, e, runA.ID), imageOf(t, e, runB.ID)
	if imgA == imgB || !slices.Contains(built, imgA) || !slices.Contains(built, imgB) {
		t.Fatalf("the runs use images %s and %s; built: %v", imgA, imgB, built)
	}
	t.Cleanup(func() {
		for _, id := range built {
			_ = testenv.RemoveImage(context.Background(), e.docker, id)
		}
	})
	// The running build's supervisor volume, made by the first run: the only
	// one with this owner so far (with its -ok companion).
	var currentVolume string
	if vols := ownedVolumes(t, e, owner); len(vols) != 2 || vols[1] != vols[0]+"-ok" {
		t.Fatalf("supervisor volumes of owner %s: %v, want one with its -ok companion", owner, vols)
	} else {
		currentVolume = vols[0]
	}
	if in, err := e.docker.ImageInspect(ctx, imgA); err != nil || in.Config.Labels[labelOwner] != owner || in.Config.Labels[labelProject] != e.project {
		t.Fatalf("built image %s: %v; want the owner and project labels", imgA, err)
	}

	// Objects prune must leave: built images of another owner and of none, and
	// supervisor volumes of other builds that are another owner's, nobody's, or
	// mounted by a container; and one it removes: this owner's, unused.
	theirImage := fixtureImage(t, e, map[string]string{labelOwner: theirs, labelProject: e.project})
	nobodysImage := fixtureImage(t, e, map[string]string{labelProject: e.project})
	oldVolume := fixtureVolume(t, e, owner)
	theirVolume := fixtureVolume(t, e, theirs)
	nobodysVolume := fixtureVolume(t, e, "")
	usedVolume := fixtureVolume(t, e, owner)
	user, err := e.docker.ContainerCreate(ctx, &container.Config{Image: e.image, Cmd: []string{"true"}, Labels: map[string]string{labelProject: e.project}},
		&container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: usedVolume, Target: "/v"}}}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	untouched := func(when string) {
		t.Helper()
		for _, im := range []string{theirImage, nobodysImage} {
			if _, err := e.docker.ImageInspect(ctx, im); err != nil {
				t.Errorf("%s: image %s is gone: %v", when, im, err)
			}
		}
		for _, v := range []string{theirVolume, theirVolume + "-ok", nobodysVolume, usedVolume, currentVolume, currentVolume + "-ok"} {
			if _, err := e.docker.VolumeInspect(ctx, v); err != nil {
				t.Errorf("%s: volume %s is gone: %v", when, v, err)
			}
		}
	}

	// A is past the retention (168h by default), B is not.
	retention := 168 * time.Hour
	mid := runA.UpdatedAt.Add(runB.UpdatedAt.Sub(runA.UpdatedAt) / 2)
	if !runB.UpdatedAt.After(runA.UpdatedAt) {
		t.Fatalf("run B stopped at %v, not after run A (%v)", runB.UpdatedAt, runA.UpdatedAt)
	}
	restore := control.SetPruneClock(func() time.Time { return mid.Add(retention) })
	defer restore()
	wantFirst := []string{"image " + imgA, "sandbox " + runA.ID, "volume " + oldVolume}

	dry, err := c.Prune(ctx, &client.PruneRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := pruned(dry); !slices.Equal(got, wantFirst) || !dry.DryRun || len(dry.Errors) > 0 {
		t.Fatalf("dry run: would remove %v (errors %v), want %v", got, dry.Errors, wantFirst)
	}
	if sb, err := c.Get(ctx, runA.ID); err != nil || sb.State != client.StateStopped {
		t.Fatalf("the dry run removed sandbox %s: %+v %v", runA.ID, sb, err)
	}
	if _, err := e.docker.ImageInspect(ctx, imgA); err != nil {
		t.Fatalf("the dry run removed image %s: %v", imgA, err)
	}
	if _, err := e.docker.VolumeInspect(ctx, oldVolume); err != nil {
		t.Fatalf("the dry run removed volume %s: %v", oldVolume, err)
	}
	untouched("after the dry run")

	res, err := c.Prune(ctx, &client.PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pruned(res); !slices.Equal(got, wantFirst) || res.DryRun || len(res.Errors) > 0 {
		t.Fatalf("prune removed %v (errors %v), want %v", got, res.Errors, wantFirst)
	}
	t.Logf("prune: %d bytes reclaimed, removed %+v", res.Reclaimed, res.Removed)
	if res.Reclaimed <= 0 {
		t.Errorf("prune reclaimed %d bytes, want > 0 (it removed a built image)", res.Reclaimed)
	}
	sbA, err := c.Get(ctx, runA.ID)
	if err != nil || sbA.State != client.StateDeleted {
		t.Fatalf("sandbox %s after prune: %+v %v, want deleted", runA.ID, sbA, err)
	}
	evs := allEvents(t, c, runA.ID)
	if last := evs[len(evs)-1]; last.Kind != "sandbox.deleted" || last.Reason != "pruned" {
		t.Errorf("sandbox %s: last event %s (%s), want sandbox.deleted (pruned)", runA.ID, last.Kind, last.Reason)
	}
	if _, err := e.docker.ImageInspect(ctx, imgA); !cerrdefs.IsNotFound(err) {
		t.Errorf("image %s of the older build is still there: %v", imgA, err)
	}
	for _, v := range []string{oldVolume, oldVolume + "-ok"} {
		if _, err := e.docker.VolumeInspect(ctx, v); !cerrdefs.IsNotFound(err) {
			t.Errorf("volume %s of another build is still there: %v", v, err)
		}
	}
	if sb, err := c.Get(ctx, runB.ID); err != nil || sb.State != client.StateStopped {
		t.Errorf("the fresh kept run %s: %+v %v, want it kept (stopped)", runB.ID, sb, err)
	}
	if _, err := e.docker.ImageInspect(ctx, imgB); err != nil {
		t.Errorf("the newest build %s is gone: %v", imgB, err)
	}
	untouched("after prune")

	// Later: B is past the retention too, and --all takes the newest build.
	restore()
	restore = control.SetPruneClock(func() time.Time { return runB.UpdatedAt.Add(retention + time.Second) })
	wantAll := []string{"image " + imgB, "sandbox " + runB.ID}
	if dry, err = c.Prune(ctx, &client.PruneRequest{DryRun: true, All: true}); err != nil {
		t.Fatal(err)
	}
	if got := pruned(dry); !slices.Equal(got, wantAll) {
		t.Fatalf("dry run --all: would remove %v, want %v", got, wantAll)
	}
	if res, err = c.Prune(ctx, &client.PruneRequest{All: true}); err != nil {
		t.Fatal(err)
	}
	if got := pruned(res); !slices.Equal(got, wantAll) || len(res.Errors) > 0 {
		t.Fatalf("prune --all removed %v (errors %v), want %v", got, res.Errors, wantAll)
	}
	if _, err := e.docker.ImageInspect(ctx, imgB); !cerrdefs.IsNotFound(err) {
		t.Errorf("image %s is still there after prune --all: %v", imgB, err)
	}
	if left := ownedImages(t, e, owner); len(left) != 0 {
		t.Errorf("built images left after prune --all: %v", left)
	}
	untouched("after prune --all")

	// Nothing left to remove.
	if res, err = c.Prune(ctx, &client.PruneRequest{All: true}); err != nil || len(res.Removed) != 0 || res.Reclaimed != 0 {
		t.Errorf("a second prune --all: %+v %v, want nothing removed", res, err)
	}
	if err := e.docker.ContainerRemove(ctx, user.ID, container.RemoveOptions{Force: true}); err != nil {
		t.Error(err)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// pruned lists "type name" of what a prune removed, sorted; images by ID.
func pruned(res *client.PruneResult) []string {
	out := []string{}
	for _, o := range res.Removed {
		name := o.Name
		if o.Type == client.PrunedImage {
			name = o.ID
		}
		out = append(out, o.Type+" "+name)
	}
	sort.Strings(out)
	return out
}

// ownedImages are the IDs of the images carrying owner's label.
func ownedImages(t *testing.T, e *env, owner string) []string {
	t.Helper()
	list, err := e.docker.ImageList(context.Background(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labelOwner+"="+owner))})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, im := range list {
		out = append(out, im.ID)
	}
	return out
}

// imageOf is the image ID of a sandbox's primary container.
func imageOf(t *testing.T, e *env, id string) string {
	t.Helper()
	in, err := e.docker.ContainerInspect(context.Background(), "airlock-"+id)
	if err != nil {
		t.Fatal(err)
	}
	return in.Image
}

// fixtureImage builds a small image tagged airlock-build/… with labels,
// removed when the test ends.
func fixtureImage(t *testing.T, e *env, labels map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	df := []byte("FROM " + e.image + "\nLABEL dev.airlock.test=" + randHex(4) + "\n")
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(df); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	tag := "airlock-build/prune-fixture:" + randHex(8)
	resp, err := e.docker.ImageBuild(context.Background(), &buf, build.ImageBuildOptions{
		Tags: []string{tag}, Labels: labels, Remove: true, ForceRemove: true, Version: build.BuilderV1})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	in, err := e.docker.ImageInspect(context.Background(), tag)
	if err != nil {
		t.Fatalf("cannot build %s: %v\n%s", tag, err, out)
	}
	t.Cleanup(func() {
		_ = testenv.RemoveImage(context.Background(), e.docker, in.ID)
	})
	return in.ID
}

// fixtureVolume makes a complete supervisor volume of a made-up build as the
// runtime does (the volume and its -ok companion, labelled with the key and
// owner unless ""), removed when the test ends.
func fixtureVolume(t *testing.T, e *env, owner string) string {
	t.Helper()
	key := randHex(8)
	name := "airlock-supervisor-" + key
	labels := map[string]string{labelSupervisor: key}
	if owner != "" {
		labels[labelOwner] = owner
	}
	for _, n := range []string{name, name + "-ok"} {
		if _, err := e.docker.VolumeCreate(context.Background(), volume.CreateOptions{Name: n, Labels: labels}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.docker.VolumeRemove(context.Background(), n, true) })
	}
	return name
}

// ownedVolumes are the names of the supervisor volumes carrying owner's label, sorted.
func ownedVolumes(t *testing.T, e *env, owner string) []string {
	t.Helper()
	resp, err := e.docker.VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", labelSupervisor), filters.Arg("label", labelOwner+"="+owner))})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range resp.Volumes {
		out = append(out, v.Name)
	}
	sort.Strings(out)
	return out
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}
