package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/docker/images"
	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestPruneCandidates: the Engine side of prune on its edges: an older build
// tagged by someone else too is only untagged (and counts no space), a project
// with a sandbox being created keeps its images, an orphan -ok companion goes,
// the running build's volume stays, and a runtime without an owner key lists
// nothing.
func TestPruneCandidates(t *testing.T) {
	t.Parallel()
	cli := testenv.Client(t)
	busybox := testenv.BusyboxImage(t)
	ctx := testContext(t, 2*time.Minute)
	// A Linux binary of its own (this test's) gives a supervisor key no
	// other runtime uses.
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	owner := ids.New()
	rt := &Runtime{Engine: cli, Owner: owner, Binary: bin, BuildID: "prune-test"}
	project := filepath.Join(t.TempDir(), "project")

	buildImage := func(tag string) string {
		t.Helper()
		id := classicBuild(t, ctx, cli, tag, "FROM "+busybox+"\nLABEL nonce="+ids.New()+"\n", nil, images.BuildLabels(rt.Owner, project))
		t.Cleanup(func() { _ = testenv.RemoveImage(context.Background(), cli, id) })
		return id
	}
	repo := projectfs.BuildRepo + "/prune-unit-" + owner[:8]
	older := buildImage(repo + ":1")
	newer := buildImage(repo + ":2")
	extra := "prune-unit-extra-" + owner[:8] + ":kept"
	if err := cli.ImageTag(ctx, older, extra); err != nil {
		t.Fatal(err)
	}

	current, err := rt.supervisors().key()
	if err != nil {
		t.Fatal(err)
	}
	mkVolume := func(name, key string) {
		t.Helper()
		if _, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: rt.supervisors().labels(key)}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.VolumeRemove(context.Background(), name, true) })
	}
	orphanKey := ids.New()[:16]
	orphan := "airlock-supervisor-" + orphanKey + "-ok"
	mkVolume(orphan, orphanKey)
	mkVolume("airlock-supervisor-"+current, current)
	mkVolume("airlock-supervisor-"+current+"-ok", current)

	list, err := rt.PruneCandidates(ctx, backend.PruneOptions{}, rt.DiskUsage(ctx))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range list {
		names = append(names, o.Type+" "+o.Name)
	}
	want := []string{"image " + repo + ":1", "volume " + orphan}
	if !slices.Equal(names, want) {
		t.Fatalf("candidates %v, want %v", names, want)
	}
	if list[0].ID != older || list[0].Size != 0 {
		t.Errorf("older build: ID %s size %d, want %s and 0 (another tag keeps it)", list[0].ID, list[0].Size, older)
	}
	for _, o := range list {
		if _, err := rt.PruneRemove(ctx, o); err != nil {
			t.Error(err)
		}
	}
	if in, err := cli.ImageInspect(ctx, older); err != nil || !slices.Equal(in.RepoTags, []string{extra}) {
		t.Errorf("the older build after prune: tags %v, %v; want only %s", in.RepoTags, err, extra)
	}
	if _, err := cli.ImageInspect(ctx, newer); err != nil {
		t.Errorf("the newest build is gone: %v", err)
	}
	if _, err := cli.VolumeInspect(ctx, orphan); !cerrdefs.IsNotFound(err) {
		t.Errorf("the orphan %s is still there: %v", orphan, err)
	}
	if _, err := cli.VolumeInspect(ctx, "airlock-supervisor-"+current); err != nil {
		t.Errorf("the running build's volume is gone: %v", err)
	}

	if list, err := rt.PruneCandidates(ctx, backend.PruneOptions{All: true, Busy: map[string]bool{project: true}}, nil); err != nil || len(list) != 0 {
		t.Errorf("a project with a sandbox being created: candidates %+v, %v; want none", list, err)
	}
	if list, err := rt.PruneCandidates(ctx, backend.PruneOptions{All: true}, nil); err != nil || len(list) != 1 || list[0].ID != newer {
		t.Errorf("--all: candidates %+v, %v; want the newest build", list, err)
	}
	anon := &Runtime{Engine: cli, Binary: bin, BuildID: "prune-test"}
	if list, err := anon.PruneCandidates(ctx, backend.PruneOptions{All: true}, nil); err != nil || len(list) != 0 {
		t.Errorf("without an owner key: candidates %+v, %v; want none", list, err)
	}
}

// TestPruneRemoveBuildSteps: removing a built image removes the untagged images
// of its build's steps too (the classic builder makes one a step, and one a
// label of the build), also when the Engine does not: the containerd image
// store (Engine 29) removes them only while every ancestor up to the base is
// there, and `docker image prune` there removes the untagged steps of the
// images a build starts FROM. Nothing of the build may stay behind.
func TestPruneRemoveBuildSteps(t *testing.T) {
	t.Parallel()
	cli := testenv.Client(t)
	busybox := testenv.BusyboxImage(t)
	ctx := testContext(t, 2*time.Minute)
	owner := ids.New()
	rt := &Runtime{Engine: cli, Owner: owner}
	project := filepath.Join(t.TempDir(), "project")

	build := func(tag, dockerfile string, labels map[string]string) string {
		t.Helper()
		id := classicBuild(t, ctx, cli, tag, dockerfile, map[string]string{"marker": owner}, labels)
		t.Cleanup(func() { _ = testenv.RemoveImage(context.Background(), cli, tag) })
		return id
	}
	// A base image of two steps, the first of which is then removed, as
	// `docker image prune` does on the containerd image store (Engine 20.10
	// refuses: a child image needs it).
	base := "prune-steps-base-" + owner[:8] + ":1"
	build(base, "FROM "+busybox+"\nLABEL base="+owner+"\nENV BASE="+owner+"\n", nil)
	if in, err := cli.ImageInspect(ctx, base); err == nil && in.Parent != "" {
		_, _ = cli.ImageRemove(ctx, in.Parent, image.RemoveOptions{})
	}
	tag := projectfs.BuildRepo + "/prune-steps-" + owner[:8] + ":1"
	id := build(tag, "FROM "+base+"\nCOPY marker /marker\n", images.BuildLabels(rt.Owner, project))

	freed, err := rt.PruneRemove(ctx, backend.PruneObject{Type: backend.PruneImage, Name: tag, ID: id, Project: project, Tags: []string{tag}})
	if err != nil || !freed {
		t.Fatalf("PruneRemove: freed %v, %v; want the image removed", freed, err)
	}
	left, err := cli.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", backend.LabelOwner+"="+owner))})
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range left {
		t.Errorf("an image of the build is left: %s %v %v", im.ID, im.RepoTags, im.Labels)
	}
	if _, err := cli.ImageInspect(ctx, base); err != nil {
		t.Errorf("the base image the build started FROM is gone: %v", err)
	}
}

// classicBuild builds tag from a Dockerfile and files with the classic
// builder (the one that leaves a build's steps as images), labelled, and
// returns its image ID.
func classicBuild(t *testing.T, ctx context.Context, cli *client.Client, tag, dockerfile string, files, labels map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, b []byte) {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b))})
		_, _ = tw.Write(b)
	}
	add("Dockerfile", []byte(dockerfile))
	for _, name := range slices.Sorted(maps.Keys(files)) {
		add(name, []byte(files[name]))
	}
	_ = tw.Close()
	resp, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{tag}, Labels: labels,
		Remove: true, ForceRemove: true, Version: build.BuilderV1})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := streamError(resp.Body); err != nil {
		t.Fatalf("cannot build %s: %v", tag, err)
	}
	in, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	return in.ID
}
