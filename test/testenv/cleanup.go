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

// Eventually polls cond until it holds, and fails the test when timeout
// passes first, naming what it waited for. It pauses between tries as long as
// the last try took (a cond that runs the CLI or asks the Engine costs tens of
// milliseconds of CPU) and a tenth of the time waited so far, at least 20 ms
// and at most 250 ms: a fixed 50 ms made a wait of seconds on such a cond burn
// most of a core.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		t0 := time.Now()
		if cond() {
			return
		}
		now := time.Now()
		if now.After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(pollPause(now.Sub(start), now.Sub(t0)))
	}
}

// pollPause is Eventually's pause after a try that took took, waited
// sinceStart after the first try began.
func pollPause(sinceStart, took time.Duration) time.Duration {
	return min(max(sinceStart/10, took, 20*time.Millisecond), 250*time.Millisecond)
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
