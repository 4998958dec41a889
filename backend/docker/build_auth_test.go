package docker

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/ids"
)

// A [sandbox.build] whose FROM image lives in a private registry: the build sends the
// docker CLI's stored credentials, as docker build does; without them the Engine is
// refused and the build fails naming the image, with no credential in any output.
func TestBuildFromPrivateRegistry(t *testing.T) {
	g := newRig(t)
	ctx := testContext(t, 3*time.Minute)
	base, reg, password := privateImage(t, g, "base")
	t.Setenv("DOCKER_AUTH_CONFIG", "")

	project := filepath.Join(t.TempDir(), "private-base")
	writeFiles(t, project, map[string]string{
		"Dockerfile": "FROM " + base + "\nLABEL built=yes\n",
		"nonce.txt":  ids.New(),
	})
	t.Cleanup(func() { removeBuilt(t, g, project) })
	r := g.manifest(project, "[sandbox]\nbuild = { context = \".\" }\n")
	secretFree := func(what, s string) { t.Helper(); assertNoPassword(t, what, s, password) }

	// No credentials: the rig's HOME has no ~/.docker.
	g.progress.Reset()
	_, err := g.rt.images(nil).Build(ctx, r)
	if err == nil || !strings.Contains(err.Error(), "cannot build the sandbox image") {
		t.Fatalf("build without credentials = %v, want a build failure", err)
	}
	secretFree("the error", err.Error())
	secretFree("the progress", g.progress.String())

	// With auths in $DOCKER_CONFIG/config.json the build pulls the base and succeeds.
	dir := t.TempDir()
	cfg := `{"auths":{"` + reg + `":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("airlock:"+password)) + `"}}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g.env["DOCKER_CONFIG"] = dir
	g.progress.Reset()
	tag, err := g.rt.images(nil).Build(ctx, r)
	if err != nil {
		t.Fatalf("build with credentials: %v", err)
	}
	secretFree("the progress", g.progress.String())
	img, err := g.cli.ImageInspect(ctx, tag)
	if err != nil || img.Config == nil || img.Config.Labels["built"] != "yes" {
		t.Errorf("built image %s: %v, labels %v", tag, err, img.Config)
	}
}
