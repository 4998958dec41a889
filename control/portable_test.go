package control

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

// A macOS kern.procargs2 buffer: argc, the executable's path, padding, argv,
// then the environment.
func TestParseProcArgs2(t *testing.T) {
	buf := binary.LittleEndian.AppendUint32(nil, 4)
	buf = append(buf, "/usr/local/bin/airlock\x00\x00\x00\x00airlock\x00--log-level\x00daemon\x00run\x00HOME=/Users/me\x00"...)
	argv := parseProcArgs2(buf)
	if want := []string{"airlock", "--log-level", "daemon", "run"}; !reflect.DeepEqual(argv, want) {
		t.Errorf("argv %q, want %q", argv, want)
	}
	if !isDaemonArgv(argv) {
		t.Error("airlock --log-level daemon run is not taken for the daemon")
	}
	for _, a := range [][]string{{"airlock", "daemon", "stop"}, {"airlock", "run", "--", "daemon", "run "}, {"daemon"}, nil} {
		if isDaemonArgv(a) {
			t.Errorf("%q taken for the daemon", a)
		}
	}
	for _, bad := range [][]byte{nil, {1, 0}, binary.LittleEndian.AppendUint32(nil, 3), append(binary.LittleEndian.AppendUint32(nil, 2), "/bin/x\x00x\x00"...)} {
		if got := parseProcArgs2(bad); got != nil {
			t.Errorf("%q parsed as %q", bad, got)
		}
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

// ProcessState tells a live process (with a stable start time) from a gone one.
func TestProcessStateOfSelfAndGone(t *testing.T) {
	st, start, ok := ProcessState(os.Getpid())
	if !ok || st == "Z" || start == "" {
		t.Fatalf("this process: %q %q %v", st, start, ok)
	}
	if _, again, _ := ProcessState(os.Getpid()); again != start {
		t.Errorf("start time %q, then %q", start, again)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := ProcessState(cmd.Process.Pid); ok {
		t.Errorf("pid %d of a reaped process is alive", cmd.Process.Pid)
	}
	if _, _, ok := ProcessState(0); ok {
		t.Error("pid 0 is alive")
	}
}
