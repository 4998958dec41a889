package testenv_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/airlock-dev/airlock/test/testenv"
)

// uniqueLabel returns a label value no other test run uses.
func uniqueLabel(t *testing.T) string {
	return strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + "-" + rand.Text()[:10]
}

// removeContainer force-removes the container when the test ends, in case the
// test did not get to remove it.
func removeContainer(t *testing.T, cli *client.Client, id string) {
	t.Cleanup(func() {
		err := cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("cannot remove container %.12s: %v", id, err)
		}
	})
}

// runContainer creates a container of cfg (no network), starts it, waits for it
// to exit and returns its exit status and output; the test removes it at the end.
func runContainer(ctx context.Context, t *testing.T, cli *client.Client, cfg *container.Config) (id string, status int64, stdout, stderr string) {
	t.Helper()
	created, err := cli.ContainerCreate(ctx, cfg, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatalf("cannot create container: %v", err)
	}
	removeContainer(t, cli, created.ID)
	// Wait for the next exit before starting, so the exit cannot be missed.
	waitC, errC := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("cannot start container: %v", err)
	}
	select {
	case res := <-waitC:
		if res.Error != nil {
			t.Fatalf("cannot wait for container: %s", res.Error.Message)
		}
		status = res.StatusCode
	case err := <-errC:
		t.Fatalf("cannot wait for container: %v", err)
	}
	logs, err := cli.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("cannot read container logs: %v", err)
	}
	defer logs.Close()
	var out, errOut bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errOut, logs); err != nil {
		t.Fatalf("cannot demultiplex container logs: %v", err)
	}
	return created.ID, status, out.String(), errOut.String()
}

func TestBusyboxImageRuns(t *testing.T) {
	cli := testenv.Client(t)
	ref := testenv.BusyboxImage(t)
	label := uniqueLabel(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	id, status, stdout, stderr := runContainer(ctx, t, cli, &container.Config{
		Image:  ref,
		Cmd:    []string{"sh", "-c", "echo hello-$((1+2)); id -u"},
		Labels: map[string]string{testenv.TestLabel: label},
	})
	if status != 0 {
		t.Errorf("container exited with status %d, want 0", status)
	}
	if want := "hello-3\n0\n"; stdout != want {
		t.Errorf("stdout = %q, want %q (stderr %q)", stdout, want, stderr)
	}
	if stderr != "" {
		t.Errorf("stderr = %q, want nothing", stderr)
	}

	if err := cli.ContainerRemove(ctx, id, container.RemoveOptions{RemoveVolumes: true}); err != nil {
		t.Fatalf("cannot remove container: %v", err)
	}
	testenv.AssertNoLeftovers(t, cli, testenv.TestLabel, label)
}

// TestBusyboxImageFiles checks the parts of the image the tests rely on.
func TestBusyboxImageFiles(t *testing.T) {
	cli := testenv.Client(t)
	ref := testenv.BusyboxImage(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	script := `set -e
stat -c '%a %u' /tmp
echo "$PATH"
id -u nobody
grep -c . /etc/group
for a in sh httpd nc wget sleep cat env id kill; do readlink /bin/$a; done
which httpd
trap 'echo trapped' USR1; kill -USR1 $$`
	_, status, stdout, stderr := runContainer(ctx, t, cli, &container.Config{Image: ref, Cmd: []string{"sh", "-c", script}, User: "nobody"})
	want := "1777 0\n" +
		"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n" +
		"65534\n" +
		"2\n" +
		strings.Repeat("/bin/busybox\n", 9) +
		"/bin/httpd\n" +
		"trapped\n"
	if out := stdout + stderr; status != 0 || out != want {
		t.Errorf("exit status %d, output:\n%s\nwant status 0, output:\n%s", status, out, want)
	}
}

func TestBusyboxImageTagIsStable(t *testing.T) {
	cli := testenv.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	ref := testenv.BusyboxImage(t)
	if !strings.HasPrefix(ref, testenv.BusyboxRepo+":") || len(ref) != len(testenv.BusyboxRepo)+1+12 {
		t.Errorf("ref = %q, want %s:<12 hex digits>", ref, testenv.BusyboxRepo)
	}
	before, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatalf("cannot inspect %s: %v", ref, err)
	}
	if again := testenv.BusyboxImage(t); again != ref {
		t.Errorf("second BusyboxImage = %q, want %q", again, ref)
	}
	// Another process goes through BuildBusyboxImage, which must find the tag
	// and reuse the image rather than build a new one.
	start := time.Now()
	built, err := testenv.BuildBusyboxImage(ctx, cli)
	if err != nil {
		t.Fatalf("BuildBusyboxImage: %v", err)
	}
	t.Logf("BuildBusyboxImage with the image present took %v", time.Since(start).Round(time.Microsecond))
	if built != ref {
		t.Errorf("BuildBusyboxImage = %q, want %q", built, ref)
	}
	after, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatalf("cannot inspect %s: %v", ref, err)
	}
	if after.ID != before.ID {
		t.Errorf("image %s was rebuilt: ID %s, was %s", ref, after.ID, before.ID)
	}
}

// recorder is a testing.TB that records failures and skips instead of acting
// on them; Fatal and Skip end the calling goroutine, as they do in testing.
type recorder struct {
	testing.TB
	mu      sync.Mutex
	errors  []string
	skipped string
	fatal   string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.mu.Lock()
	r.skipped = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls f(r) in its own goroutine, so that Fatal and Skip can end it.
func (r *recorder) run(f func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}

func TestAssertNoLeftoversReportsObjects(t *testing.T) {
	cli := testenv.Client(t)
	ref := testenv.BusyboxImage(t)
	label := uniqueLabel(t)
	labels := map[string]string{testenv.TestLabel: label}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	ctr, err := cli.ContainerCreate(ctx, &container.Config{Image: ref, Labels: labels},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatalf("cannot create container: %v", err)
	}
	removeContainer(t, cli, ctr.ID)
	netw, err := cli.NetworkCreate(ctx, "airlock-test-"+label, network.CreateOptions{Labels: labels})
	if err != nil {
		t.Fatalf("cannot create network: %v", err)
	}
	t.Cleanup(func() { cli.NetworkRemove(context.Background(), netw.ID) })
	vol, err := cli.VolumeCreate(ctx, volume.CreateOptions{Labels: labels})
	if err != nil {
		t.Fatalf("cannot create volume: %v", err)
	}
	t.Cleanup(func() { cli.VolumeRemove(context.Background(), vol.Name, true) })

	r := &recorder{TB: t}
	r.run(func(tb testing.TB) { testenv.AssertNoLeftovers(tb, cli, testenv.TestLabel, label) })
	if len(r.errors) != 1 {
		t.Fatalf("AssertNoLeftovers reported %q, want one error", r.errors)
	}
	for _, want := range []string{"3 Engine object(s)", "(" + ctr.ID[:12], "network airlock-test-" + label, "volume " + vol.Name} {
		if !strings.Contains(r.errors[0], want) {
			t.Errorf("AssertNoLeftovers reported %q, want it to mention %q", r.errors[0], want)
		}
	}

	// Another label value must not see them.
	r = &recorder{TB: t}
	r.run(func(tb testing.TB) { testenv.AssertNoLeftovers(tb, cli, testenv.TestLabel, label+"-other") })
	if len(r.errors) != 0 {
		t.Errorf("AssertNoLeftovers with another value reported %q", r.errors)
	}
}

func TestClientWithoutEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/no-engine.sock")

	for _, tc := range []struct {
		skip      string   // AIRLOCK_SKIP_DOCKER
		wantFatal []string // in the failure; none: Client must not fail
		wantSkip  string   // how the skip message starts; "": Client must not skip
	}{
		{skip: "", wantFatal: []string{"./scripts/engine.sh", "make engine"}},
		{skip: "1", wantSkip: "AIRLOCK_SKIP_DOCKER=1: "},
	} {
		t.Run("skip="+tc.skip, func(t *testing.T) {
			t.Setenv(testenv.SkipDockerEnv, tc.skip)
			r := &recorder{TB: t}
			r.run(func(tb testing.TB) { testenv.Client(tb) })
			if (r.fatal != "") != (len(tc.wantFatal) > 0) {
				t.Errorf("Client failed with %q, want a failure naming %q", r.fatal, tc.wantFatal)
			}
			for _, w := range tc.wantFatal {
				if !strings.Contains(r.fatal, w) {
					t.Errorf("Client failed with %q, want a hint naming %q", r.fatal, w)
				}
			}
			if (r.skipped != "") != (tc.wantSkip != "") || !strings.HasPrefix(r.skipped, tc.wantSkip) {
				t.Errorf("Client skipped with %q, want a skip starting with %q", r.skipped, tc.wantSkip)
			}
		})
	}
}
