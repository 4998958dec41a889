package docker

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
)

func TestGoArch(t *testing.T) {
	for in, want := range map[string]string{
		"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64",
		"armv7l": "arm", "i686": "386", "s390x": "s390x", "ppc64le": "ppc64le",
	} {
		if got := GoArch(in); got != want {
			t.Errorf("GoArch(%q) = %q, want %q", in, got, want)
		}
	}
}

// tinyBinaries are small Go programs built once for the binary checks.
var tinyBinaries struct {
	once sync.Once
	dir  string
	err  error
}

const tinySource = `package main

import (
	"fmt"
	"os/user"
)

func main() { u, _ := user.Current(); fmt.Println("tiny", u != nil) }
`

// tinyBinary is the tiny program built for goos/goarch (with cgo when cgo is
// "1": os/user then links the C library dynamically).
func tinyBinary(t *testing.T, goos, goarch, cgo string) string {
	t.Helper()
	tinyBinaries.once.Do(func() {
		tinyBinaries.dir = filepath.Join(testBin.dir, "tiny")
		if err := os.MkdirAll(tinyBinaries.dir, 0o755); err != nil {
			tinyBinaries.err = err
			return
		}
		src := filepath.Join(tinyBinaries.dir, "main.go")
		tinyBinaries.err = os.WriteFile(src, []byte(tinySource), 0o644)
	})
	if tinyBinaries.err != nil {
		t.Fatal(tinyBinaries.err)
	}
	out := filepath.Join(tinyBinaries.dir, goos+"-"+goarch+"-cgo"+cgo)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	cmd := exec.Command("go", "build", "-o", out, "main.go")
	cmd.Dir = tinyBinaries.dir
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED="+cgo)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot build the tiny program for %s/%s (cgo %s): %v\n%s", goos, goarch, cgo, err, b)
	}
	return out
}

// The binary to inject must be a Linux ELF for the Engine's architecture, and
// the CLI's own executable a static one: each refusal says what is wrong.
func TestCheckLinuxBinary(t *testing.T) {
	static := tinyBinary(t, "linux", "amd64", "0")
	arm := tinyBinary(t, "linux", "arm64", "0")
	mac := tinyBinary(t, "darwin", "arm64", "0")
	text := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckLinuxBinary(static, "amd64", true); err != nil {
		t.Errorf("a static linux/amd64 binary: %v", err)
	}
	if err := CheckLinuxBinary(arm, "arm64", true); err != nil {
		t.Errorf("a static linux/arm64 binary: %v", err)
	}
	for _, c := range []struct {
		path, arch string
		want       string
	}{
		{arm, "amd64", "is a binary for linux/arm64, not for the Engine's linux/amd64"},
		{static, "arm64", "is a binary for linux/amd64, not for the Engine's linux/arm64"},
		{mac, "arm64", "is not a Linux binary"},
		{text, "amd64", "is not a Linux binary"},
		{filepath.Join(t.TempDir(), "missing"), "amd64", "cannot read the airlock binary to inject"},
	} {
		err := CheckLinuxBinary(c.path, c.arch, false)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s for %s: %v, want an error naming it that says %q", filepath.Base(c.path), c.arch, err, c.want)
		}
	}
	if cc, err := exec.Command("go", "env", "CC").Output(); err == nil {
		if _, err := exec.LookPath(strings.Fields(string(cc) + " cc")[0]); err == nil {
			dyn := tinyBinary(t, "linux", "amd64", "1")
			if err := CheckLinuxBinary(dyn, "amd64", false); err != nil {
				t.Errorf("a dynamic binary without the static check: %v", err)
			}
			err := CheckLinuxBinary(dyn, "amd64", true)
			if err == nil || !strings.Contains(err.Error(), "dynamically linked") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
				t.Errorf("a dynamic binary: %v, want a refusal that says how to build a static one", err)
			}
		}
	}
}

func gzipFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// An embedded (gzip) supervisor: its size is the uncompressed one, it reads
// back whole, and its key follows its content.
func TestSupervisorGzip(t *testing.T) {
	bin := tinyBinary(t, "linux", "amd64", "0")
	gz := gzipFile(t, bin)
	sup, err := SupervisorGzip("test", gz)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(bin)
	if sup.Size != int64(len(want)) {
		t.Errorf("size %d, want %d", sup.Size, len(want))
	}
	r, err := sup.Open()
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("the content read back differs (%v)", err)
	}
	other, _ := SupervisorGzip("other", gzipFile(t, tinyBinary(t, "linux", "arm64", "0")))
	if other.Key == sup.Key || supervisorKeyFor(sup, "amd64") == supervisorKeyFor(sup, "arm64") {
		t.Error("the supervisor key does not tell the binaries or the architectures apart")
	}
	if _, err := SupervisorGzip("junk", []byte("not gzip at all, not at all")); err == nil {
		t.Error("junk accepted as a gzip supervisor")
	}
}

// The supervisor volume holds the binary FindSupervisor gives for the Engine's
// architecture (asked of the Engine), decompressed, working; the volume is
// labelled with the architecture, and a refusal of FindSupervisor is the
// runtime's error (exit 125), naming the Engine's architecture.
func TestSupervisorVolumeForEngineArch(t *testing.T) {
	g := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := g.cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	arch := GoArch(info.Architecture)

	// A gzip of the tiny program for the Engine's architecture, with bytes of
	// its own at the end: a fresh key, so the volume is filled here. (Not
	// airlock itself: gzip and gunzip of its 33 MB in this race-instrumented
	// test took 15 s of CPU.)
	bin := filepath.Join(t.TempDir(), "airlock")
	if b, err := os.ReadFile(tinyBinary(t, "linux", arch, "0")); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(bin, append(b, []byte(t.Name()+time.Now().String())...), 0o755); err != nil {
		t.Fatal(err)
	}
	sup, err := SupervisorGzip("test gzip", gzipFile(t, bin))
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	g.rt.FindSupervisor = func(a string) (*Supervisor, error) { asked = append(asked, a); return sup, nil }
	name, err := g.rt.supervisors().volume(ctx, g.busybox)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = g.cli.VolumeRemove(context.Background(), name, true)
		_ = g.cli.VolumeRemove(context.Background(), name+"-ok", true)
	})
	if name != SupervisorVolumeName(sup, arch) || len(asked) == 0 || asked[0] != arch {
		t.Errorf("volume %s for %v, want %s for [%s]", name, asked, SupervisorVolumeName(sup, arch), arch)
	}
	v, err := g.cli.VolumeInspect(ctx, name)
	if err != nil || v.Labels[labelSupervisorArch] != arch {
		t.Errorf("volume labels %v (%v), want %s=%s", v.Labels, err, labelSupervisorArch, arch)
	}
	out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none",
		"-v", name+":/airlock/bin:ro", g.busybox, "/airlock/bin/airlock").CombinedOutput()
	if err != nil || string(out) != "tiny true\n" {
		t.Errorf("the binary in the volume: %v\n%s", err, out)
	}

	// No supervisor for this Engine: the runtime's error, and nothing made.
	g.rt.FindSupervisor = func(a string) (*Supervisor, error) {
		return nil, errors.New("this airlock build has no linux/" + a + " supervisor")
	}
	_, err = g.rt.supervisors().volume(ctx, g.busybox)
	var se *backend.Error
	if !errors.As(err, &se) || se.Code != 125 || !strings.Contains(err.Error(), "no linux/"+arch+" supervisor") {
		t.Errorf("without a supervisor: %v, want a runtime error (125) that says so", err)
	}
}
