package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/airlock-dev/airlock/test/clitest"
)

// hostUID is the user TestHostUser runs airlock as when the tests run as
// root: a uid the busybox image has no account for.
const hostUID = 4321

// TestHostUser: sandbox.user = "host" runs the main command as the user
// running the CLI (resolved by the CLI, so the daemon it starts, which runs
// as that user too here, gets the numbers), with an account and a writable
// HOME the image did not have; a file it makes in the project is that user's
// on the host. A writable mount that user cannot write is warned about
// before the start. When the tests run as root, airlock runs as uid 4321
// (with the Engine socket's group), so that "host" means someone else than
// root.
func TestHostUser(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"
network = "none"
user = "host"

[mounts.cache]
source = "./root-cache"
target = "/cache"
`)
	uid, gid := os.Getuid(), os.Getgid()
	var cred *syscall.Credential
	if uid == 0 {
		uid, gid = hostUID, hostUID
		cred = asUser(t, e, uid)
	}
	// The cache is the test's (root's, when it runs as root): the sandbox
	// user cannot write it then.
	if err := os.Mkdir(filepath.Join(e.Project, "root-cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
		defer cancel()
		cmd := e.Command(ctx, args...)
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		return clitest.RunCmd(t, cmd)
	}
	if cred != nil {
		// Stopped by its own user (before the env's cleanup, which runs as root).
		t.Cleanup(func() { run("daemon", "stop") })
	}
	script := `id -u; id -g; id -un; touch made-here; echo "$HOME"; touch "$HOME/x" && echo home-writable; touch /cache/x 2>/dev/null || echo cache-refused`
	r := run("run", "--", "sh", "-c", script)
	want := fmt.Sprintf("%d\n%d\nairlock\n/home/airlock\nhome-writable\ncache-refused\n", uid, gid)
	if os.Getuid() != 0 {
		// The test's own user may be in the image (or not): its name and home vary.
		if r.Code != 0 || !strings.HasPrefix(r.Stdout, fmt.Sprintf("%d\n%d\n", uid, gid)) || !strings.Contains(r.Stdout, "home-writable\n") {
			t.Errorf("want exit 0, uid %d and gid %d and a writable HOME, got %s", uid, gid, r)
		}
	} else if r.Code != 0 || r.Stdout != want {
		t.Errorf("want exit 0 and\n%s\ngot %s", want, r)
	}
	st, err := os.Stat(filepath.Join(e.Project, "made-here"))
	if err != nil {
		t.Fatalf("the file made in the project: %v", err)
	}
	if s := st.Sys().(*syscall.Stat_t); int(s.Uid) != uid || int(s.Gid) != gid {
		t.Errorf("made-here belongs to %d:%d on the host, want %d:%d", s.Uid, s.Gid, uid, gid)
	}
	if os.Getuid() == 0 {
		contains(t, "stderr", r.Stderr, fmt.Sprintf("warning: mounts.cache (target /cache): the sandbox user (uid %d, gid %d) cannot write %s: owned by 0:0, mode 0755;",
			uid, gid, filepath.Join(e.Project, "root-cache")))
	}
	// config shows what the manifest says; the daemon got the numbers.
	if c := run("config"); !strings.Contains(c.Stdout, `user = "host"`) {
		t.Errorf("config: %s", c)
	}
	e.assertClean()
}

// asUser hands e's directories (its HOME, XDG dirs and project) and the
// binary's folder to uid and returns the credentials airlock then runs with:
// uid, its own gid, and the group of the Engine's socket, so that the control
// daemon it starts reaches the Engine.
func asUser(t *testing.T, e *env, uid int) *syscall.Credential {
	t.Helper()
	root := filepath.Dir(e.Project)
	// Opened to others, never narrowed: the binary's folder may be a shared
	// one (AIRLOCK_E2E_BINARY=/tmp/airlock), whose 1777 must stay.
	for _, d := range []string{filepath.Dir(root), root, filepath.Dir(clitest.Bin)} {
		st, err := os.Stat(d)
		if err == nil {
			err = os.Chmod(d, st.Mode()&(os.ModePerm|os.ModeSticky)|0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{e.Home, e.Config, e.Data, e.Runtime, e.Project} {
		err := filepath.Walk(d, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, uid)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
	sock := "/var/run/docker.sock"
	if h, ok := os.LookupEnv("DOCKER_HOST"); ok {
		sock = strings.TrimPrefix(h, "unix://")
	}
	if st, err := os.Stat(sock); err == nil {
		cred.Groups = []uint32{st.Sys().(*syscall.Stat_t).Gid}
	}
	return cred
}
