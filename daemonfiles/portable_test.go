package daemonfiles

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// isDaemonArgv takes "daemon run" after the program name and global flags for
// the daemon, and nothing else.
func TestIsDaemonArgv(t *testing.T) {
	if !isDaemonArgv([]string{"airlock", "--log-level", "daemon", "run"}) {
		t.Error("airlock --log-level daemon run is not taken for the daemon")
	}
	for _, a := range [][]string{{"airlock", "daemon", "stop"}, {"airlock", "run", "--", "daemon", "run "}, {"daemon"}, nil} {
		if isDaemonArgv(a) {
			t.Errorf("%q taken for the daemon", a)
		}
	}
	if daemonProcess(os.Getpid()) {
		t.Error("the test process is taken for the daemon")
	}
}

// Where /proc/locks cannot be read (macOS), whether the daemon's lock is held
// is found by trying it: taken while another open file holds it (a flock
// belongs to the open file, so one in this process counts as another's would),
// free again after, and the try leaves it free.
func TestLockTaken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "airlockd.lock")
	if lockTaken(path) {
		t.Error("a missing lock file is taken")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if lockTaken(path) {
		t.Error("a free lock is taken")
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("the probe left the lock held: %v", err)
	}
	if !lockTaken(path) {
		t.Error("a held lock is not taken")
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	if lockTaken(path) {
		t.Error("a released lock is taken")
	}
}
