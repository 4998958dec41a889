package testenv

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
)

// ForceRemove removes every container (with its anonymous volumes), network
// and volume labelled key=value, whatever their state: a test's last resort
// after it asserted that nothing is left. Errors are ignored.
func ForceRemove(cli client.APIClient, key, value string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", key+"="+value))
	if list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err == nil {
		for _, c := range list {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
	}
	if nets, err := cli.NetworkList(ctx, network.ListOptions{Filters: f}); err == nil {
		for _, n := range nets {
			_ = cli.NetworkRemove(ctx, n.ID)
		}
	}
	if vols, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f}); err == nil {
		for _, v := range vols.Volumes {
			_ = cli.VolumeRemove(ctx, v.Name, true)
		}
	}
}

// Eventually polls cond every 50 ms until it holds, and fails the test when
// timeout passes first, naming what it waited for.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RemoveSupervisorVolume removes, at the end of a test run, the supervisor
// volume (and its -ok companion) of a test binary: nameFor gives its name from
// the Engine's architecture as the Engine says it (Info.Architecture). Best
// effort: a volume a leftover container still uses stays.
func RemoveSupervisorVolume(nameFor func(engineArch string) (string, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := NewClient(ctx)
	if err != nil {
		return
	}
	defer cli.Close()
	info, err := cli.Info(ctx)
	if err != nil {
		return
	}
	name, err := nameFor(info.Architecture)
	if err != nil {
		return
	}
	if err := cli.VolumeRemove(ctx, name, false); err == nil || cerrdefs.IsNotFound(err) {
		_ = cli.VolumeRemove(ctx, name+"-ok", false)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	addr, err := FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	return int(netip.MustParseAddrPort(addr).Port())
}

// FreeLoopbackAddr returns an address 127.0.0.1:PORT that nothing listens on now.
func FreeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
