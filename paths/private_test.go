package paths

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// otherUID is a uid that is not the test's (only root can give files to it).
const otherUID = 4243

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to give a file to another uid")
	}
}

func wantUnsafe(t *testing.T, err error, dir string, parts ...string) {
	t.Helper()
	var ue *UnsafeDirError
	if !errors.As(err, &ue) {
		t.Fatalf("%s: got %v, want an *UnsafeDirError", dir, err)
	}
	msg := err.Error()
	for _, p := range append([]string{dir}, parts...) {
		if !strings.Contains(msg, p) {
			t.Errorf("%s: the error %q does not say %q", dir, msg, p)
		}
	}
}

// A missing directory is made with mode 0700 (its parent too), and accepted
// again afterwards.
func TestEnsurePrivateDirMakes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "parent", "airlock-1")
	for i := 0; i < 2; i++ {
		if err := EnsurePrivateDir(dir); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		st, err := os.Lstat(dir)
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Fatalf("call %d: %v %v, want a directory with mode 0700", i, st.Mode(), err)
		}
	}
}

// An existing directory that is not a real 0700 directory of the user's is
// refused, and left as it was.
func TestEnsurePrivateDirRefuses(t *testing.T) {
	root := t.TempDir()

	loose := filepath.Join(root, "loose")
	if err := os.Mkdir(loose, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o777); err != nil {
		t.Fatal(err)
	}
	wantUnsafe(t, EnsurePrivateDir(loose), loose, "mode 0777")
	if st, _ := os.Stat(loose); st.Mode().Perm() != 0o777 {
		t.Errorf("the refused directory's mode was changed to %v", st.Mode())
	}

	target := filepath.Join(root, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	wantUnsafe(t, EnsurePrivateDir(link), link, "symbolic link", target)

	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wantUnsafe(t, EnsurePrivateDir(file), file, "not a directory")
}

// A directory another user made first (the /tmp/airlock-<uid> attack) is
// refused, naming its owner.
func TestEnsurePrivateDirRefusesOtherOwner(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), "airlock-0")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
	wantUnsafe(t, EnsurePrivateDir(dir), dir, "uid 4243", "not to you (uid 0 (root))")
}

// The fallback runtime dir's error says how to get out of it.
func TestEnsureRuntimeDirHint(t *testing.T) {
	p := &Paths{RuntimeDir: filepath.Join(t.TempDir(), "rt"), runtimeFallback: true}
	if err := os.Mkdir(p.RuntimeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p.RuntimeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	wantUnsafe(t, p.EnsureRuntimeDir(), p.RuntimeDir, "XDG_RUNTIME_DIR", "mode 0755", "export XDG_RUNTIME_DIR=", "mkdir -m 0700")
}

func TestOpenSharedLock(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "x.lock")
	f, err := OpenSharedLock(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Errorf("the lock file: %v %v, want a regular file with mode 0600", st.Mode(), err)
	}
	// Again: the existing file is used.
	if f, err := OpenSharedLock(path); err != nil {
		t.Error(err)
	} else {
		f.Close()
	}

	// A symbolic link is not followed: its target is not created.
	victim := filepath.Join(root, "victim")
	link := filepath.Join(root, "link.lock")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenSharedLock(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a symbolic link: %v, want a refusal", err)
		if f != nil {
			f.Close()
		}
	}
	if _, err := os.Lstat(victim); !os.IsNotExist(err) {
		t.Errorf("the link's target was created (%v)", err)
	}

	// A FIFO is refused without hanging.
	fifo := filepath.Join(root, "fifo.lock")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenSharedLock(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO: %v, want a refusal", err)
		if f != nil {
			f.Close()
		}
	}
}

// Another user's lock file is refused (they could hold it locked for ever);
// root's is used.
func TestOpenSharedLockOwner(t *testing.T) {
	requireRoot(t)
	root := t.TempDir()
	theirs := filepath.Join(root, "theirs.lock")
	if err := os.WriteFile(theirs, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenSharedLock(theirs); err == nil || !strings.Contains(err.Error(), "uid 4243") {
		t.Errorf("another user's lock file: %v, want a refusal naming uid 4243", err)
		if f != nil {
			f.Close()
		}
	}
}
