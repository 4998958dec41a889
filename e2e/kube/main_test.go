//go:build kube

// Package kube_test runs the airlock binary against a real single-node
// Kubernetes cluster (scripts/kube.sh): `make test-kube`. The cluster's
// kubeconfig comes from AIRLOCK_KUBECONFIG (default: what `scripts/kube.sh
// kubeconfig` prints); the tests fail without a cluster.
package kube_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/clitest"
	"github.com/airlock-dev/airlock/internal/imagetar"
	"github.com/airlock-dev/airlock/internal/testenv"
)

var (
	kubeconfig string
	airlockRef string // the airlock image of the binary under test, in the cluster
	busybox    string // the busybox test image, in the cluster
)

func TestMain(m *testing.M) { os.Exit(clitest.MainWith(m, "kube", "AIRLOCK_E2E_BINARY", setup)) }

// setup imports the airlock image of the binary under test and the busybox test
// image into the cluster's containerd.
func setup() error {
	kubeconfig = os.Getenv("AIRLOCK_KUBECONFIG")
	if kubeconfig == "" {
		out, err := exec.Command(repoFile("scripts/kube.sh"), "kubeconfig").Output()
		if err != nil {
			return fmt.Errorf("cannot find the test cluster's kubeconfig (scripts/kube.sh kubeconfig): %v", err)
		}
		kubeconfig = strings.TrimSpace(string(out))
	}
	if _, err := os.Stat(kubeconfig); err != nil {
		return fmt.Errorf("no test cluster: %v (start one with scripts/kube.sh up)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := os.ReadFile(clitest.Bin)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(bin)
	airlockRef = imagetar.ImageRef("e2e-" + hex.EncodeToString(sum[:6]))
	var tarball bytes.Buffer
	if _, err := imagetar.Write(&tarball, imagetar.Image{Ref: airlockRef, OS: "linux", Architecture: runtime.GOARCH, Entrypoint: []string{"/airlock"},
		Files: []imagetar.File{{Path: "/airlock", Mode: 0o755, Data: bin}}}); err != nil {
		return err
	}
	if err := importImage(ctx, &tarball); err != nil {
		return fmt.Errorf("cannot import %s into the cluster: %v", airlockRef, err)
	}
	cli, err := testenv.NewClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	if busybox, err = testenv.BuildBusyboxImage(ctx, cli); err != nil {
		return err
	}
	rc, err := cli.ImageSave(ctx, []string{busybox})
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := importImage(ctx, rc); err != nil {
		return fmt.Errorf("cannot import %s into the cluster: %v", busybox, err)
	}
	return nil
}

// importImage imports an image archive into the test cluster's containerd.
func importImage(ctx context.Context, r io.Reader) error {
	cmd := exec.CommandContext(ctx, repoFile("scripts/kube.sh"), "import", "-")
	cmd.Stdin = r
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

func repoFile(rel string) string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", rel)
}
