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
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/test/testenv"
)

func TestDockerignore(t *testing.T) {
	ig := parseDockerignore(`
# comment
*.log
/build
**/node_modules
docs/**/*.tmp
secret?.txt
!important.log
tmp[0-9]
./dist/
`)
	for path, want := range map[string]bool{
		"a.log":                   true,
		"sub/a.log":               false, // *.log is for the root only
		"important.log":           false,
		"build":                   true,
		"build/x/y":               true, // below an excluded dir
		"sub/build":               false,
		"node_modules/x":          true,
		"a/b/node_modules/c/d.js": true,
		"docs/a.tmp":              true, // ** matches zero segments
		"docs/x/y/a.tmp":          true,
		"docs/x/a.txt":            false,
		"secret1.txt":             true,
		"secret.txt":              false,
		"tmp3":                    true,
		"tmpx":                    false,
		"dist/a":                  true,
		"main.go":                 false,
	} {
		if got := ig.excluded(path); got != want {
			t.Errorf("excluded(%q) = %v, want %v", path, got, want)
		}
	}
	// The last matching line wins.
	ig = parseDockerignore("logs\n!logs/keep.txt\n")
	if ig.excluded("logs/keep.txt") || !ig.excluded("logs/other.txt") {
		t.Errorf("an exception below an excluded dir is not honoured")
	}
	ig = parseDockerignore("!a.txt\n*.txt\n")
	if !ig.excluded("a.txt") {
		t.Errorf("a later pattern does not override an earlier exception")
	}
}

func TestRepoName(t *testing.T) {
	for in, want := range map[string]string{
		"my-project":   "my-project",
		"My_Project.2": "my-project-2",
		"--x--":        "x",
		"Ünïcode":      "n-code",
		"...":          "project",
		"":             "project",
	} {
		if got := repoName(in); got != want {
			t.Errorf("repoName(%q) = %q, want %q", in, got, want)
		}
	}
}

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

func TestBuildContextHash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proj")
	writeFiles(t, dir, map[string]string{
		"Dockerfile":    "FROM scratch\n",
		"app/main.txt":  "v1",
		"ignored.log":   "x",
		".dockerignore": "*.log\n",
	})
	r := &manifest.Resolved{ProjectDir: dir}
	r.Sandbox.Build = &manifest.Build{Context: ".", Dockerfile: "Dockerfile", Args: map[string]string{"A": "1"}}
	sum := func() string {
		t.Helper()
		bc, err := newBuildContext(r)
		if err != nil {
			t.Fatal(err)
		}
		h, err := bc.hash()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := sum()
	if sum() != base {
		t.Fatal("the hash of an unchanged context changed")
	}
	writeFiles(t, dir, map[string]string{"ignored.log": "changed"})
	if sum() != base {
		t.Error("a change to an ignored file changed the hash")
	}
	r.Sandbox.Build.Args["A"] = "2"
	if sum() == base {
		t.Error("a changed build arg kept the hash")
	}
	r.Sandbox.Build.Args["A"] = "1"
	if err := os.Chmod(filepath.Join(dir, "app/main.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if sum() == base {
		t.Error("a changed file mode kept the hash")
	}
	if err := os.Chmod(filepath.Join(dir, "app/main.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if sum() != base {
		t.Error("restoring the mode did not restore the hash")
	}
	writeFiles(t, dir, map[string]string{"app/main.txt": "v2"})
	if sum() == base {
		t.Error("a changed file kept the hash")
	}

	r.Sandbox.Build.Dockerfile = "../Dockerfile"
	var e *backend.Error
	if _, err := newBuildContext(r); !errors.As(err, &e) || e.Code != 2 {
		t.Errorf("a Dockerfile outside the context: %v, want a config error", err)
	}
	r.Sandbox.Build.Dockerfile = "Dockerfile"
	r.Sandbox.Build.Context = "missing"
	if _, err := newBuildContext(r); !errors.As(err, &e) || e.Code != 2 || !strings.Contains(err.Error(), "sandbox.build.context") {
		t.Errorf("a missing context: %v, want a config error naming sandbox.build.context", err)
	}
}

func TestBuildImage(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := testContext(t, 3*time.Minute)
	project := filepath.Join(t.TempDir(), "Build_Project")
	writeFiles(t, project, map[string]string{
		"docker/Dockerfile": "FROM " + g.busybox + "\nARG WHO\nCOPY greeting.txt /greeting.txt\nRUN echo \"built for $WHO\" > /who.txt\n",
		"greeting.txt":      "hello v1\n",
		// A nonce keeps this run's tag its own: a concurrent or earlier run of this
		// test must not provide the image.
		"nonce.txt":     ids.New(),
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
	if again, err := g.rt.build(ctx, r); err != nil || again != tag {
		t.Errorf("after an ignored change: build = %q, %v; want %q", again, err, tag)
	}
	writeFiles(t, project, map[string]string{"greeting.txt": "hello v2\n"})
	g.progress.Reset()
	tag2, err := g.rt.build(ctx, r)
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
