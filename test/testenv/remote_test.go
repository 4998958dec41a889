package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// hostTmpProbe lists the Engine host's /tmp, bind-mounted at /host-tmp, and
// tells whether the path given as $1 (below /tmp) is there.
const hostTmpProbe = `test -d /host-tmp || exit 2
if test -e "/host-tmp/${1#/tmp/}"; then echo visible; else echo absent; fi`

// httpGetLoop fetches $1 until it answers or about 10 s have passed. (The
// static busybox's wget -T crashes, hence timeout.)
const httpGetLoop = `for i in $(seq 100); do
  if out=$(timeout 5 wget -qO- "$1"); then echo "$out"; exit 0; fi
  sleep 0.1
done
echo "no answer from $1" >&2; exit 1`

// createContainer creates a container labelled for this test on cli and
// removes it when the test ends; name may be empty.
func createContainer(ctx context.Context, t *testing.T, cli *client.Client, name string, cfg *container.Config, host *container.HostConfig) string {
	t.Helper()
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	cfg.Labels[TestLabel] = t.Name()
	created, err := cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if err != nil {
		t.Fatalf("cannot create container %v on %s: %v", cfg.Cmd, cli.DaemonHost(), err)
	}
	t.Cleanup(func() {
		err := cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("cannot remove container %.12s: %v", created.ID, err)
		}
	})
	return created.ID
}

// startContainer creates and starts a container; see createContainer.
func startContainer(ctx context.Context, t *testing.T, cli *client.Client, name string, cfg *container.Config, host *container.HostConfig) string {
	t.Helper()
	id := createContainer(ctx, t, cli, name, cfg, host)
	if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatalf("cannot start container %v on %s: %v", cfg.Cmd, cli.DaemonHost(), err)
	}
	return id
}

// runToExit runs a container to its exit and returns its status and output.
func runToExit(ctx context.Context, t *testing.T, cli *client.Client, cfg *container.Config, host *container.HostConfig) (status int64, stdout, stderr string) {
	t.Helper()
	id := createContainer(ctx, t, cli, "", cfg, host)
	// Wait for the next exit before starting, so the exit cannot be missed.
	waitC, errC := cli.ContainerWait(ctx, id, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatalf("cannot start container %v on %s: %v", cfg.Cmd, cli.DaemonHost(), err)
	}
	select {
	case res := <-waitC:
		if res.Error != nil {
			t.Fatalf("cannot wait for container %v: %s", cfg.Cmd, res.Error.Message)
		}
		status = res.StatusCode
	case err := <-errC:
		t.Fatalf("cannot wait for container %v: %v", cfg.Cmd, err)
	}
	logs, err := cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("cannot read the logs of container %v: %v", cfg.Cmd, err)
	}
	defer logs.Close()
	var out, errOut bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errOut, logs); err != nil {
		t.Fatalf("cannot demultiplex the logs of container %v: %v", cfg.Cmd, err)
	}
	return status, strings.TrimSpace(out.String()), strings.TrimSpace(errOut.String())
}

// processesMentioning lists the processes whose command line contains s.
func processesMentioning(s string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			found = append(found, e.Name()+": "+string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return found
}

func TestRemoteEngine(t *testing.T) {
	if skipDocker() {
		t.Skipf("%s=1: skipping test that needs Docker Engines", SkipDockerEnv)
	}
	hostCli := Client(t)
	if out, err := exec.Command("ip", "link", "show", "docker0").CombinedOutput(); err != nil {
		t.Fatalf("the host has no docker0 before the test: %v: %s", err, out)
	}

	// The project stand-in: a directory in this host's /tmp.
	project := t.TempDir()
	if !strings.HasPrefix(project, "/tmp/") {
		t.Fatalf("t.TempDir() = %s, not below /tmp (TMPDIR=%q): the stand-in hides only /tmp", project, os.Getenv("TMPDIR"))
	}
	if err := os.WriteFile(filepath.Join(project, "marker"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostTmp := []mount.Mount{{Type: mount.TypeBind, Source: "/tmp", Target: "/host-tmp", ReadOnly: true}}

	// Control: through the host's Engine the probe sees the project, so
	// "absent" below means something.
	{
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		ref := BusyboxImage(t)
		status, stdout, stderr := runToExit(ctx, t, hostCli, &container.Config{
			Image: ref, Cmd: []string{"sh", "-c", hostTmpProbe, "sh", project},
		}, &container.HostConfig{NetworkMode: "none", Mounts: hostTmp})
		cancel()
		if status != 0 || stdout != "visible" {
			t.Fatalf("on the host Engine, probe of %s = exit %d, stdout %q, stderr %q; want 0, visible", project, status, stdout, stderr)
		}
	}

	var r *RemoteEngine
	var port string
	t.Run("remote", func(t *testing.T) {
		r = StartRemoteEngine(t)
		u, err := url.Parse(r.Host)
		if err != nil || u.Scheme != "tcp" || u.Hostname() != "127.0.0.1" {
			t.Fatalf("Host = %q, want tcp://127.0.0.1:PORT", r.Host)
		}
		port = u.Port()
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()

		info, err := r.Client.Info(ctx)
		if err != nil {
			t.Fatalf("Info: %v", err)
		}
		hostInfo, err := hostCli.Info(ctx)
		if err != nil {
			t.Fatalf("Info of the host Engine: %v", err)
		}
		t.Logf("remote Engine: %s, storage driver %s, ID %s, API %s", info.ServerVersion, info.Driver, info.ID, r.Client.ClientVersion())
		if info.ID == hostInfo.ID {
			t.Errorf("the stand-in has the host Engine's ID %s, want its own", info.ID)
		}
		if info.Driver != remoteStorageDriver {
			t.Errorf("storage driver = %s, want %s", info.Driver, remoteStorageDriver)
		}
		ref := r.BusyboxImage(t)
		if again := r.BusyboxImage(t); again != ref {
			t.Errorf("second BusyboxImage = %s, want %s", again, ref)
		}

		// (a) The stand-in's host has a /tmp, but not this host's.
		status, stdout, stderr := runToExit(ctx, t, r.Client, &container.Config{
			Image: ref, Cmd: []string{"sh", "-c", hostTmpProbe, "sh", project},
		}, &container.HostConfig{NetworkMode: "none", Mounts: hostTmp})
		if status != 0 || stdout != "absent" {
			t.Errorf("on the stand-in, probe of %s = exit %d, stdout %q, stderr %q; want 0, absent", project, status, stdout, stderr)
		}
		status, stdout, stderr = runToExit(ctx, t, r.Client, &container.Config{
			Image: ref, Cmd: []string{"sh", "-c", `test ! -e "$1"`, "sh", project},
		}, &container.HostConfig{NetworkMode: "none"})
		if status != 0 {
			t.Errorf("on the stand-in, test ! -e %s = exit %d (stdout %q, stderr %q), want 0", project, status, stdout, stderr)
		}
		// What airlock hits today on a remote Engine (issue 9): a bind mount
		// of the project dir fails.
		_, err = r.Client.ContainerCreate(ctx, &container.Config{Image: ref, Cmd: []string{"true"}, Labels: map[string]string{TestLabel: t.Name()}},
			&container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeBind, Source: project, Target: project}}}, nil, nil, "")
		if err == nil || !strings.Contains(err.Error(), "bind source path does not exist") {
			t.Errorf("bind mount of %s on the stand-in: err = %v, want bind source path does not exist", project, err)
		}

		// (b) Networking: a server on a user-defined network and on the default bridge.
		suffix := strings.ToLower(rand.Text()[:8])
		netName, web := "airlock-remote-test-"+suffix, "web-"+suffix
		_, err = r.Client.NetworkCreate(ctx, netName, network.CreateOptions{Driver: "bridge", Labels: map[string]string{TestLabel: t.Name()}})
		if err != nil {
			t.Fatalf("cannot create network %s: %v", netName, err)
		}
		webID := startContainer(ctx, t, r.Client, web, &container.Config{
			Image:    ref,
			Cmd:      []string{"sh", "-c", `mkdir -p /tmp/www && echo "hello from $(hostname)" >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www`},
			Hostname: web,
		}, &container.HostConfig{NetworkMode: container.NetworkMode(netName)})
		if err := r.Client.NetworkConnect(ctx, "bridge", webID, nil); err != nil {
			t.Fatalf("cannot connect %s to the default bridge: %v", web, err)
		}
		inspect, err := r.Client.ContainerInspect(ctx, webID)
		if err != nil {
			t.Fatalf("cannot inspect %s: %v", web, err)
		}
		bridgeIP := ""
		if ep := inspect.NetworkSettings.Networks["bridge"]; ep != nil {
			bridgeIP = ep.IPAddress
		}
		if bridgeIP == "" {
			t.Fatalf("%s has no address on the default bridge: %+v", web, inspect.NetworkSettings.Networks)
		}
		want := "hello from " + web
		for _, c := range []struct {
			what, netMode, url string
		}{
			{"by name on " + netName, netName, "http://" + web + ":8080/"},
			{"from the default bridge", "bridge", "http://" + bridgeIP + ":8080/"},
		} {
			status, stdout, stderr := runToExit(ctx, t, r.Client, &container.Config{
				Image: ref, Cmd: []string{"sh", "-c", httpGetLoop, "sh", c.url},
			}, &container.HostConfig{NetworkMode: container.NetworkMode(c.netMode)})
			if status != 0 || stdout != want {
				t.Errorf("GET %s %s = exit %d, stdout %q, stderr %q; want 0, %q", c.url, c.what, status, stdout, stderr, want)
			}
		}
		AssertNoLeftovers(t, hostCli, TestLabel, t.Name()) // nothing of this landed on the host Engine
	})
	if r == nil || r.Dir == "" {
		return // it failed to start, and said why
	}

	// After the stand-in's cleanup: nothing left, and the host's Engine intact.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := hostCli.Ping(ctx); err != nil {
		t.Errorf("the host Engine does not answer after the stand-in stopped: %v", err)
	}
	if out, err := exec.Command("ip", "link", "show", "docker0").CombinedOutput(); err != nil {
		t.Errorf("ip link show docker0 after the stand-in stopped: %v: %s", err, out)
	}
	// Its dockerd, containerd, shims and socat all name its directory.
	if left := processesMentioning(filepath.Base(r.Dir)); len(left) > 0 {
		t.Errorf("processes of the stand-in remain:\n  %s", strings.Join(left, "\n  "))
	}
	if _, err := os.Stat(r.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists (stat: %v)", r.Dir, err)
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err != nil {
		t.Error(err)
	} else if bytes.Contains(mi, []byte(remoteRunPrefix)) {
		t.Errorf("host mounts mention %s:\n%s", remoteRunPrefix, mi)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
		c.Close()
		t.Errorf("127.0.0.1:%s still accepts connections", port)
	}
	if _, err := os.Stat(filepath.Join(project, "marker")); err != nil {
		t.Errorf("the project dir on the host changed: %v", err)
	}
}
