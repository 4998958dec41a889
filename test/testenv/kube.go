package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"

	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/internal/imagetar"
)

// The project's test cluster (scripts/kube.sh) gets its images by import into its
// own containerd: there is no registry. script is the path of scripts/kube.sh.

// KubeImport imports an image archive into the test cluster.
func KubeImport(ctx context.Context, script string, r io.Reader) error {
	cmd := exec.CommandContext(ctx, script, "import", "-")
	cmd.Stdin = r
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cannot import an image into the test cluster: %v: %s", err, out)
	}
	return nil
}

// KubeImportImage imports a local image of the Docker Engine into the test cluster.
func KubeImportImage(ctx context.Context, cli client.APIClient, script, ref string) error {
	rc, err := cli.ImageSave(ctx, []string{ref})
	if err != nil {
		return fmt.Errorf("cannot save %s: %w", ref, err)
	}
	defer rc.Close()
	return KubeImport(ctx, script, rc)
}

// KubeImportAirlock imports the airlock image of a static linux binary (FROM
// scratch + /airlock, as make image writes it) into the test cluster, named after
// the binary's content, and returns its reference. With binary "", the binary
// is the in-sandbox build of this tree (BuildInSandbox), what make image holds.
func KubeImportAirlock(ctx context.Context, script, binary string) (string, error) {
	if binary == "" {
		dir, err := os.MkdirTemp("", "airlock-image-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
		binary = dir + "/airlock"
		if err := BuildInSandbox(binary); err != nil {
			return "", err
		}
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(bin)
	ref := imagetar.ImageRef("test-" + hex.EncodeToString(sum[:6]))
	var tarball bytes.Buffer
	if _, err := imagetar.Write(&tarball, imagetar.Image{Ref: ref, OS: "linux", Architecture: runtime.GOARCH,
		Entrypoint: []string{"/airlock"}, Files: []imagetar.File{{Path: "/airlock", Mode: 0o755, Data: bin}}}); err != nil {
		return "", err
	}
	return ref, KubeImport(ctx, script, &tarball)
}
