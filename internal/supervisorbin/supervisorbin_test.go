package supervisorbin_test

import (
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/internal/supervisorbin"
)

// SkipQemuEnv names the variable that, set to 1, skips the test that needs
// qemu-aarch64-static instead of failing it.
const SkipQemuEnv = "AIRLOCK_SKIP_QEMU"

// supervisor writes the linux/arch supervisor to a temporary file: the
// embedded one (make build, make test after make cross), else one built here
// as make build would (go test without -tags embedsupervisors).
func supervisor(t *testing.T, arch string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "airlock-linux-"+arch)
	if gz := supervisorbin.Gzipped(arch); gz != nil {
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatalf("the embedded linux/%s supervisor: %v", arch, err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("the embedded linux/%s supervisor: %v", arch, err)
		}
		if err := os.WriteFile(out, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return out
	}
	t.Logf("this test binary embeds no supervisors (no -tags %s): building linux/%s here", supervisorbin.Tag, arch)
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" {
		t.Fatalf("cannot find the module root: %v", err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "insandbox", "-ldflags", "-s -w", "-o", out, "./cmd/airlock")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot build the linux/%s supervisor: %v\n%s", arch, err, b)
	}
	return out
}

// The supervisor leaves out what no process in a sandbox uses and every one
// would pay for at its start: it is the in-sandbox commands alone (tag
// insandbox), without the Kubernetes client, compose-go (whose JSON schema
// compiler alone took ~15 ms of each start), the Engine client or the daemon's
// store (~3 ms more, all together, of each exec).
func TestSupervisorLeavesOutKubeAndCompose(t *testing.T) {
	info, err := buildinfo.ReadFile(supervisor(t, runtime.GOARCH))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range info.Deps {
		for _, out := range []string{"k8s.io/", "github.com/compose-spec/compose-go", "github.com/santhosh-tekuri/jsonschema", "github.com/docker/docker", "go.etcd.io/bbolt", "github.com/BurntSushi/toml"} {
			if strings.HasPrefix(d.Path, out) {
				t.Errorf("the supervisor links %s %s", d.Path, d.Version)
			}
		}
	}
}

// The linux/arm64 supervisor is a working binary: its version command runs
// under qemu-aarch64-static (Debian's qemu-user-static), whatever the host.
func TestArm64SupervisorRunsUnderQemu(t *testing.T) {
	qemu, err := exec.LookPath("qemu-aarch64-static")
	if err != nil {
		if skip, _ := strconv.ParseBool(os.Getenv(SkipQemuEnv)); skip {
			t.Skipf("%s=1: skipping the linux/arm64 supervisor check: %v", SkipQemuEnv, err)
		}
		t.Fatalf("qemu-aarch64-static is missing (%v): install Debian's qemu-user-static (./scripts/engine.sh does), "+
			"or set %s=1 to skip this test", err, SkipQemuEnv)
	}
	bin := supervisor(t, "arm64")
	if err := docker.CheckLinuxBinary(bin, "arm64", true); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(qemu, bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "airlock ") || !strings.Contains(string(out), "(build ") {
		t.Fatalf("qemu-aarch64-static %s version: %v\n%s", bin, err, out)
	}
	t.Logf("linux/arm64: %s", strings.TrimSpace(string(out)))
}

// A build that embeds the supervisors has both, each a static Linux binary of
// its architecture, the same build as the CLI; the one of this host's
// architecture runs here.
func TestEmbeddedSupervisors(t *testing.T) {
	if !supervisorbin.Embedded() {
		t.Skipf("this test binary embeds no supervisors: make test embeds them after make build or make cross (-tags %s)", supervisorbin.Tag)
	}
	for _, arch := range supervisorbin.Arches {
		bin := supervisor(t, arch)
		if err := docker.CheckLinuxBinary(bin, arch, true); err != nil {
			t.Errorf("the embedded linux/%s supervisor: %v", arch, err)
		}
		if runtime.GOOS == "linux" && runtime.GOARCH == arch {
			out, err := exec.Command(bin, "version").CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "airlock ") {
				t.Errorf("the embedded linux/%s supervisor's version: %v\n%s", arch, err, out)
			}
		}
	}
}
