//go:build linux

package cli

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// superviseRun runs airlock in-process with stdin.
func superviseRun(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"supervise"}, args...), stdin, &out, &errb, func(string) (string, bool) { return "", false })
	return result{code, out.String(), errb.String()}
}

// TestSuperviseTarUntar: `supervise tar` archives a path named from its base
// name and `supervise untar` extracts it elsewhere, owned by --owner; an
// escaping entry fails with 125 and names it.
func TestSuperviseTarUntar(t *testing.T) {
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "out", "dist", "app.js"), "js")
	r := superviseRun(t, strings.NewReader(""), "tar", "--from-dir", filepath.Join(src, "out"), "dist")
	if r.code != 0 {
		t.Fatalf("tar: exit %d: %s", r.code, r.stderr)
	}
	dst := filepath.Join(t.TempDir(), "new")
	owner := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
	if u := superviseRun(t, strings.NewReader(r.stdout), "untar", "--owner", owner, dst); u.code != 0 || u.stderr != "" {
		t.Fatalf("untar: exit %d: %s", u.code, u.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "dist", "app.js")); err != nil || string(b) != "js" {
		t.Fatalf("extracted dist/app.js: %q, %v", b, err)
	}

	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	if err := tw.WriteHeader(&tar.Header{Name: "../evil", Typeflag: tar.TypeReg, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	u := superviseRun(t, &evil, "untar", dst)
	if u.code != ExitAirlock || !strings.HasPrefix(u.stderr, `airlock: cannot extract "../evil" into `+dst) {
		t.Fatalf("an escaping entry: exit %d, %q; want 125 naming it", u.code, u.stderr)
	}
}

// TestSuperviseInstall copies the running executable, mode 0755.
func TestSuperviseInstall(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "bin", "airlock")
	if r := superviseRun(t, nil, "install", dest); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	st, err := os.Stat(dest)
	if err != nil || st.Mode().Perm() != 0o755 || st.Size() == 0 {
		t.Fatalf("%s: %v, %v; want an executable", dest, st, err)
	}
}

// TestSuperviseUsageErrors: wrong arguments exit 2; a signal the kernel would
// drop is refused with 125 before anything is sent. (No test here sends a
// signal: PID 1 of the test is the machine's init.)
func TestSuperviseUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"install"}, ExitUsage, "accepts 1 arg"},
		{[]string{"untar"}, ExitUsage, "accepts 1 arg"},
		{[]string{"untar", "--owner", "root", t.TempDir()}, ExitUsage, "invalid --owner"},
		{[]string{"tar"}, ExitUsage, "requires at least 1 arg"},
		{[]string{"signal"}, ExitUsage, "accepts 1 arg"},
		{[]string{"signal", "NOPE"}, ExitUsage, `cannot use signal "NOPE"`},
		{[]string{"signal", "0"}, ExitUsage, "cannot use signal 0"},
		{[]string{"signal", "KILL"}, ExitAirlock, "cannot send SIGKILL"},
	} {
		r := superviseRun(t, strings.NewReader(""), c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("supervise %q: exit %d, %q; want %d and %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}
