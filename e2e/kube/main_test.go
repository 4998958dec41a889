//go:build kube

// Package kube_test runs the airlock binary against a real two-node
// Kubernetes cluster (scripts/kube.sh): `make test-kube`. The cluster's
// kubeconfig comes from AIRLOCK_KUBECONFIG (default: what `scripts/kube.sh
// kubeconfig` prints); the tests fail without a cluster.
package kube_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
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
	script := repoFile("scripts/kube.sh")
	var err error
	if airlockRef, err = testenv.KubeImportAirlock(ctx, script, ""); err != nil {
		return err
	}
	cli, err := testenv.NewClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	if busybox, err = testenv.BuildBusyboxImage(ctx, cli); err != nil {
		return err
	}
	return testenv.KubeImportImage(ctx, cli, script, busybox)
}

func repoFile(rel string) string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", rel)
}
