// Package testenv gives integration tests a Docker Engine client and locally
// built test images.
//
// Integration tests fail, not skip, when no Engine answers, so a broken set-up
// is never mistaken for a green run. Set AIRLOCK_SKIP_DOCKER=1 to skip them
// instead on machines that cannot run an Engine.
package testenv

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
)

// SkipDockerEnv names the variable that, set to 1, makes integration tests skip
// instead of fail when no Docker Engine answers.
const SkipDockerEnv = "AIRLOCK_SKIP_DOCKER"

// TestLabel is the label key integration tests put on the Engine objects they
// create, with a value unique to the test, so AssertNoLeftovers can find them.
const TestLabel = "dev.airlock.test"

// pingTimeout bounds the Engine reachability check.
const pingTimeout = 5 * time.Second

// NewClient connects to the Docker Engine named by the environment
// (DOCKER_HOST and friends, else the local socket), negotiates the API version
// and checks that the Engine answers. The caller closes the client.
func NewClient(ctx context.Context) (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("cannot create Docker Engine client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	ping, err := cli.Ping(ctx)
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("cannot reach Docker Engine at %s: %w", cli.DaemonHost(), err)
	}
	// Negotiate now from this ping rather than with a second one on the first request.
	cli.NegotiateAPIVersionPing(ping)
	return cli, nil
}

// Client returns a client of the Docker Engine, closed when the test ends.
// When no Engine answers, the test fails with a hint on how to start one, or
// is skipped when AIRLOCK_SKIP_DOCKER=1.
func Client(t testing.TB) *client.Client {
	t.Helper()
	cli, err := NewClient(context.Background())
	if err != nil {
		if skipDocker() {
			t.Skipf("%s=1: skipping test that needs a Docker Engine: %v", SkipDockerEnv, err)
		}
		t.Fatalf("%v\nintegration tests need a Docker Engine: start one with ./scripts/engine.sh (or make engine), "+
			"or set %s=1 to skip these tests", err, SkipDockerEnv)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func skipDocker() bool {
	skip, err := strconv.ParseBool(os.Getenv(SkipDockerEnv))
	return err == nil && skip
}

// Leftovers lists the containers (running or not), networks and volumes that
// carry the label key=value, one "kind name (id)" line each.
func Leftovers(ctx context.Context, cli client.APIClient, key, value string) ([]string, error) {
	f := filters.NewArgs(filters.Arg("label", key+"="+value))
	var out []string

	ctrs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("cannot list containers labelled %s=%s: %w", key, value, err)
	}
	for _, c := range ctrs {
		name := strings.TrimPrefix(strings.Join(c.Names, ","), "/")
		out = append(out, fmt.Sprintf("container %s (%.12s, %s)", name, c.ID, c.State))
	}

	nets, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("cannot list networks labelled %s=%s: %w", key, value, err)
	}
	for _, n := range nets {
		out = append(out, fmt.Sprintf("network %s (%.12s)", n.Name, n.ID))
	}

	vols, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("cannot list volumes labelled %s=%s: %w", key, value, err)
	}
	for _, v := range vols.Volumes {
		out = append(out, fmt.Sprintf("volume %s", v.Name))
	}
	return out, nil
}

// AwaitNoLeftovers waits up to grace for the objects labelled key=value to be gone
// (airlock run hands their removal to the daemon) and returns those still there.
func AwaitNoLeftovers(ctx context.Context, cli client.APIClient, key, value string, grace time.Duration) ([]string, error) {
	deadline := time.Now().Add(grace)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		left, err := Leftovers(ctx, cli, key, value)
		if err != nil || len(left) == 0 || time.Now().After(deadline) {
			return left, err
		}
		time.Sleep(wait)
	}
}

// RemovalGrace is how long a removal the control daemon finishes after the CLI
// returned (airlock run hands it over once the main command exited) may take.
const RemovalGrace = 10 * time.Second

// AssertNoLeftovers fails the test, listing them, when containers, networks or
// volumes labelled key=value remain, e.g. dev.airlock.sandbox=<id> after a
// sandbox was removed, once RemovalGrace has passed.
func AssertNoLeftovers(t testing.TB, cli client.APIClient, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), RemovalGrace+30*time.Second)
	defer cancel()
	left, err := AwaitNoLeftovers(ctx, cli, key, value, RemovalGrace)
	if err != nil {
		t.Errorf("cannot check for leftovers: %v", err)
		return
	}
	if len(left) > 0 {
		t.Errorf("%d Engine object(s) labelled %s=%s remain:\n  %s", len(left), key, value, strings.Join(left, "\n  "))
	}
}

// RemoveImage removes the image ref (a tag or an ID) with the untagged images
// it was built on (the classic builder's steps), as a test's cleanup: first
// without force, which prunes them on both image stores, then with force for
// an image a container still names. (The containerd image store, Engine 29's
// default, removes only the image itself when forced.)
func RemoveImage(ctx context.Context, cli client.APIClient, ref string) error {
	_, err := cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		_, err = cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true})
	}
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}
