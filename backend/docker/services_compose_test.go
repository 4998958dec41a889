package docker

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/go-units"

	"github.com/airlock-dev/airlock/backend"
)

// TestServiceComposeKeys: a service written as compose files write them gets
// what each key means on a real Engine: a one-shot job it depends on with
// service_completed_successfully ran to the end first and left its file in a
// named volume they share; a bind of the project read-only; entrypoint, user,
// working_dir, env_file, aliases, tmpfs, shm_size, extra_hosts, capabilities and
// ulimits; a healthcheck whose start_interval gates the start long before its
// interval would; sandbox.extra_hosts on the primary; the named volume removed
// with the sandbox.
func TestServiceComposeKeys(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := testContext(t, 2*time.Minute)
	dir := t.TempDir()
	for name, content := range map[string]string{"init/hello.txt": "hello-from-bind\n", "ci/web.env": "# env_file\nFROM_FILE=file\nOVERRIDDEN=file\n"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sandbox.toml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := g.manifest(dir, `
[sandbox]
image = "{{busybox}}"
ready_timeout = "20s"
extra_hosts = ["primary-extra:10.1.2.3"]

[services.job]
image = "{{busybox}}"
command = ["sh", "-c", "sleep 0.5; echo from-job > /shared/job.txt"]
volumes = ["shared:/shared"]

[services.web]
image = "{{busybox}}"
entrypoint = ["sh", "-c"]
command = ["cat /shared/job.txt /init/hello.txt > /www/index.html && id -u >> /www/index.html && pwd >> /www/index.html && echo $FROM_FILE-$OVERRIDDEN >> /www/index.html && exec httpd -f -p 8080 -h /www"]
user = "1234:1234"
working_dir = "/tmp"
shm_size = "80m"
env_file = ["ci/web.env"]
env = { OVERRIDDEN = "toml" }
extra_hosts = ["svc-extra:10.9.8.7"]
aliases = ["www"]
volumes = ["./init:/init:ro", "shared:/shared:ro"]
tmpfs = ["/www:mode=1777"]
cap_drop = ["ALL"]
cap_add = ["NET_BIND_SERVICE"]
ulimits = { nofile = { soft = 1000, hard = 2000 }, nproc = 500 }
depends_on = { job = "service_completed_successfully" }
healthcheck = { cmd = ["wget", "-qO", "/dev/null", "http://127.0.0.1:8080/"], interval = "1h", start_period = "1m", start_interval = "100ms" }
`)
	sb := g.create(ctx, r, "sh", "-c", "wget -qO- http://www:8080/ && grep primary-extra /etc/hosts")
	code, stdout, stderr := g.run(ctx, sb)
	want := "from-job\nhello-from-bind\n1234\n/tmp\nfile-toml\n10.1.2.3\tprimary-extra\n"
	if code != 0 || stdout != want {
		t.Fatalf("main command: exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, want)
	}

	ci, err := g.cli.ContainerInspect(ctx, sb.Services["web"])
	if err != nil {
		t.Fatal(err)
	}
	h := ci.HostConfig
	if h.ShmSize != 80<<20 || !slices.Contains(h.ExtraHosts, "svc-extra:10.9.8.7") || !slices.Contains(h.CapDrop, "CAP_ALL") && !slices.Contains(h.CapDrop, "ALL") {
		t.Errorf("web's host config: shm %d, extra hosts %v, cap_drop %v", h.ShmSize, h.ExtraHosts, h.CapDrop)
	}
	if !slices.ContainsFunc(h.Ulimits, func(u *units.Ulimit) bool { return u.Name == "nofile" && u.Soft == 1000 && u.Hard == 2000 }) ||
		!slices.ContainsFunc(h.Ulimits, func(u *units.Ulimit) bool { return u.Name == "nproc" && u.Soft == 500 && u.Hard == 500 }) {
		t.Errorf("web's ulimits: %v", h.Ulimits)
	}
	if ci.Config.User != "1234:1234" || ci.Config.WorkingDir != "/tmp" {
		t.Errorf("web's user %q, working dir %q", ci.Config.User, ci.Config.WorkingDir)
	}
	// The job ran to its end before web started, which its exit code tells.
	job, err := g.cli.ContainerInspect(ctx, sb.Services["job"])
	if err != nil {
		t.Fatal(err)
	}
	if job.State.Running || job.State.ExitCode != 0 {
		t.Errorf("job: running %v, exit %d", job.State.Running, job.State.ExitCode)
	}
	if jobEnd, _ := time.Parse(time.RFC3339Nano, job.State.FinishedAt); !jobEnd.Before(mustTime(t, ci.State.StartedAt)) {
		t.Errorf("web started at %s, before the job it depends on finished at %s", ci.State.StartedAt, job.State.FinishedAt)
	}

	if err := g.rt.Remove(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	vols, err := g.cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", backend.LabelSandbox+"="+sb.ID))})
	if err != nil || len(vols.Volumes) != 0 {
		t.Errorf("volumes of the removed sandbox: %v %v", vols.Volumes, err)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestServiceJobFailure: a job another service waits on that exits non-zero
// fails the start (125) naming it and its code, and the waiting service never
// starts; a missing bind source is a config error before anything exists.
func TestServiceJobFailure(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := testContext(t, 2*time.Minute)
	r := g.manifest(t.TempDir(), `
[sandbox]
image = "{{busybox}}"
ready_timeout = "20s"

[services.migrate]
image = "{{busybox}}"
command = ["sh", "-c", "echo schema is broken; exit 3"]

[services.app]
image = "{{busybox}}"
command = ["sleep", "300"]
depends_on = { migrate = "service_completed_successfully" }
`)
	sb := g.create(ctx, r, "true")
	err := g.rt.Start(ctx, sb)
	if err == nil || errCode(err) != 125 || !strings.Contains(err.Error(), "service migrate did not complete successfully: it exited with code 3") || !strings.Contains(err.Error(), "schema is broken") {
		t.Fatalf("Start: %v (code %d), want 125 naming migrate, its code and its output", err, errCode(err))
	}
	app, ierr := g.cli.ContainerInspect(ctx, sb.Services["app"])
	if ierr != nil || app.State.StartedAt != "0001-01-01T00:00:00Z" {
		t.Errorf("app started although the job it waits on failed: %+v %v", app.State, ierr)
	}

	r = g.manifest(t.TempDir(), "[sandbox]\nimage = \"{{busybox}}\"\n[services.db]\nimage = \"{{busybox}}\"\nvolumes = [\"./nowhere:/x\"]\n")
	_, err = g.rt.Create(ctx, &backend.Request{Manifest: r, Kind: backend.KindRun, Command: []string{"true"}})
	if err == nil || errCode(err) != 2 || !strings.Contains(err.Error(), "services.db.volumes: \"./nowhere:/x\": ") || !strings.Contains(err.Error(), "nowhere does not exist") {
		t.Errorf("a missing bind source: %v (code %d), want a config error", err, errCode(err))
	}
}

// errCode is the exit code an error of the runtime carries (0 for none).
func errCode(err error) int {
	var e *backend.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}
