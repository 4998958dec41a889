package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildIDFromInfo(t *testing.T) {
	exe := func() string { return "0badcafe" }
	noExe := func() string { return "" }
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "5ad67291c7e0a0e1f4b5f3a2a1d9e8c7b6a5f4e3"
	for _, c := range []struct {
		name string
		info *debug.BuildInfo
		exe  func() string
		want string
	}{
		{"clean checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, exe, "5ad6729"},
		{"dirty checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")}, exe, "5ad6729-dirty.0badcafe"},
		{"dirty, executable unreadable", &debug.BuildInfo{Settings: vcs(rev, "true")}, noExe, "5ad6729-dirty"},
		{"go 1.24 version stamp too", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260101000000-5ad67291c7e0+dirty"}, Settings: vcs(rev, "true")}, exe, "5ad6729-dirty.0badcafe"},
		{"go install @version", &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, exe, "v0.2.0"},
		{"go install @pseudo-version", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260101000000-5ad67291c7e0"}}, exe, "v0.0.0-20260101000000-5ad67291c7e0"},
		{"no VCS stamp (go run, -buildvcs=false)", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, exe, "0.1.0-dev+0badcafe"},
		{"no build info", nil, exe, "unknown+0badcafe"},
		{"nothing at all", &debug.BuildInfo{}, noExe, "unknown"},
	} {
		if got := buildIDFromInfo(c.info, "0.1.0-dev", c.exe); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// buildTiny builds a one-file program for goos/goarch at out.
func buildTiny(t *testing.T, dir, src, goos, goarch, out string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "main.go")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for %s/%s: %v\n%s", goos, goarch, err, b)
	}
}

// The executable part of a dirty build's ID is read from the Go build ID of
// Linux (ELF) and macOS (Mach-O) binaries alike: the same source gives the same
// ID (a rebuild does not replace the daemon), any change another.
func TestExecutableID(t *testing.T) {
	dir := t.TempDir()
	const srcA = "package main\n\nfunc main() { println(\"a\") }\n"
	const srcB = "package main\n\nfunc main() { println(\"b\") }\n"
	for _, target := range []string{"linux/amd64", "darwin/arm64"} { // ELF and Mach-O
		goos, goarch, _ := strings.Cut(target, "/")
		a1, a2, b := filepath.Join(dir, goos+goarch+"-a1"), filepath.Join(dir, goos+goarch+"-a2"), filepath.Join(dir, goos+goarch+"-b")
		buildTiny(t, dir, srcA, goos, goarch, a1)
		buildTiny(t, dir, srcA, goos, goarch, a2)
		buildTiny(t, dir, srcB, goos, goarch, b)
		gid, err := goBuildID(a1)
		want, terr := exec.Command("go", "tool", "buildid", a1).Output()
		if err != nil || terr != nil || gid == "" || gid != strings.TrimSpace(string(want)) {
			t.Errorf("%s: Go build ID %q (%v), want %q (%v)", target, gid, err, strings.TrimSpace(string(want)), terr)
		}
		id1, err1 := executableID(a1)
		id2, err2 := executableID(a2)
		idB, errB := executableID(b)
		if err1 != nil || err2 != nil || errB != nil || !regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(id1) {
			t.Fatalf("%s: %q %v, %v, %v", target, id1, err1, err2, errB)
		}
		if id1 != id2 {
			t.Errorf("%s: two builds of the same source: %s and %s, want the same", target, id1, id2)
		}
		if id1 == idB {
			t.Errorf("%s: builds of different sources share the ID %s", target, id1)
		}
	}
}

// A plain go build in a git checkout (no -ldflags) reports the commit it was
// built from, with -dirty.<8 hex> when the tree has changes, not "unknown".
// (-buildvcs=true: a GOFLAGS=-buildvcs=false set for the machine does not hide
// the stamp here.)
func TestPlainBuildReportsVCSRevision(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" {
		t.Fatalf("cannot find the module root: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): nothing to stamp", err)
	}
	bin := filepath.Join(t.TempDir(), "airlock")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=true", "-o", bin, "./cmd/airlock")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	short := strings.TrimSpace(string(head))[:7]
	re := regexp.MustCompile(`^airlock \S+ \(build ` + short + `(-dirty\.[0-9a-f]{8})?\)$`)
	if !re.MatchString(strings.TrimSpace(string(out))) {
		t.Errorf("version of a plain build: %q, want the build %s[-dirty.<8 hex>]", out, short)
	}
}
