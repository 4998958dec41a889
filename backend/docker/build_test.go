package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/test/testenv"
)

// writeFiles writes files (slash paths relative to dir → content).
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBuildImage(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := testContext(t, 3*time.Minute)
	project := filepath.Join(t.TempDir(), "Build_Project")
	nonce := ids.New()
	writeFiles(t, project, map[string]string{
		// The label keeps every step of this build its own: another test's
		// removal of its build steps (their cache) cannot take one this build
		// reuses (the containerd image store of Engine 29 said "unable to find
		// image" for a step removed under the second build).
		"docker/Dockerfile": "FROM " + g.busybox + "\nLABEL airlock.test.build=" + nonce + "\nARG WHO\nCOPY greeting.txt /greeting.txt\nRUN echo \"built for $WHO\" > /who.txt\n",
		"greeting.txt":      "hello v1\n",
		// A nonce keeps this run's tag its own: a concurrent or earlier run of this
		// test must not provide the image.
		"nonce.txt":     nonce,
		"scratch.log":   "ignored\n",
		".dockerignore": "*.log\n",
	})
	t.Cleanup(func() { removeBuilt(t, g, project) })
	r := g.manifest(project, `
[sandbox]
build = { context = ".", dockerfile = "docker/Dockerfile", args = { WHO = "tests" } }
`)

	// First create: a build, with its steps shown.
	sb := g.create(ctx, r, "cat", "/greeting.txt", "/who.txt")
	out := g.progress.String()
	if !strings.Contains(out, "Step 1/") || !strings.Contains(out, " : FROM "+g.busybox) {
		t.Errorf("progress lacks the build steps:\n%s", out)
	}
	ci, err := g.cli.ContainerInspect(ctx, sb.PrimaryID)
	if err != nil {
		t.Fatal(err)
	}
	tag := ci.Config.Image
	if !strings.HasPrefix(tag, "airlock-build/build-project:") || len(tag) != len("airlock-build/build-project:")+16 {
		t.Errorf("sandbox image = %q, want airlock-build/build-project:<16 hex>", tag)
	}
	img, err := g.cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if img.Config == nil || img.Config.Labels[backend.LabelProject] != project {
		t.Errorf("image labels = %v, want %s=%s", img.Config.Labels, backend.LabelProject, project)
	}
	code, stdout, stderr := g.run(ctx, sb)
	if code != 0 || stdout != "hello v1\nbuilt for tests\n" {
		t.Errorf("main = exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// Second create: the tag is reused, nothing is built.
	g.progress.Reset()
	sb2 := g.create(ctx, r, "true")
	ci2, err := g.cli.ContainerInspect(ctx, sb2.PrimaryID)
	if err != nil {
		t.Fatal(err)
	}
	if ci2.Config.Image != tag || ci2.Image != ci.Image {
		t.Errorf("second create uses %s (%s), want %s (%s)", ci2.Config.Image, ci2.Image, tag, ci.Image)
	}
	if out := g.progress.String(); strings.Contains(out, "Step ") {
		t.Errorf("the second create built again:\n%s", out)
	}

	// An ignored file does not count; a context file does.
	writeFiles(t, project, map[string]string{"scratch.log": "changed\n"})
	if again, err := g.rt.images(nil).Build(ctx, r); err != nil || again != tag {
		t.Errorf("after an ignored change: build = %q, %v; want %q", again, err, tag)
	}
	writeFiles(t, project, map[string]string{"greeting.txt": "hello v2\n"})
	g.progress.Reset()
	tag2, err := g.rt.images(nil).Build(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if tag2 == tag || !strings.HasPrefix(tag2, "airlock-build/build-project:") {
		t.Errorf("after a context change: tag %q, want a new one (was %q)", tag2, tag)
	}
	if !strings.Contains(g.progress.String(), " : COPY greeting.txt /greeting.txt") {
		t.Errorf("the changed context was not built:\n%s", g.progress.String())
	}
}

func TestBuildFailure(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := testContext(t, 2*time.Minute)
	project := filepath.Join(t.TempDir(), "broken")
	writeFiles(t, project, map[string]string{
		"Dockerfile": "FROM " + g.busybox + "\nRUN echo about-to-fail && exit 7\n",
		"nonce.txt":  ids.New(),
	})
	t.Cleanup(func() { removeBuilt(t, g, project) })
	r := g.manifest(project, `
[sandbox]
build = {}
`)
	g.rt.Quiet = true
	id := "build-fail-" + ids.New()[:8]
	_, err := g.rt.Create(ctx, &backend.Request{ID: id, Manifest: r, Kind: backend.KindRun, Command: []string{"true"}})
	var e *backend.Error
	if !errors.As(err, &e) || e.Code != 125 {
		t.Fatalf("Create = %v, want an *Error with code 125", err)
	}
	if want := "cannot build the sandbox image: The command '/bin/sh -c echo about-to-fail && exit 7' returned a non-zero code: 7"; err.Error() != want {
		t.Errorf("Create error = %q, want %q", err, want)
	}
	if out := g.progress.String(); out != "" {
		t.Errorf("quiet build wrote progress: %q", out)
	}
	testenv.AssertNoLeftovers(t, g.cli, backend.LabelSandbox, id)
}

// removeBuilt removes the images built for a project (by their project label).
func removeBuilt(t *testing.T, g *testRig, project string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := g.cli.ImageList(ctx, image.ListOptions{All: true})
	if err != nil {
		t.Errorf("cannot list images: %v", err)
		return
	}
	for _, img := range list {
		if img.Labels[backend.LabelProject] != project {
			continue
		}
		if err := testenv.RemoveImage(ctx, g.cli, img.ID); err != nil {
			t.Errorf("cannot remove image %.12s: %v", img.ID, err)
		}
	}
}
