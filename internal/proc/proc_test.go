package proc

import (
	"encoding/binary"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"testing"
)

// State tells a live process (with a stable start time) from a gone one.
func TestStateOfSelfAndGone(t *testing.T) {
	st, start, ok := State(os.Getpid())
	if !ok || st == "Z" || (start == "" && (runtime.GOOS == "linux" || runtime.GOOS == "darwin")) {
		t.Fatalf("this process: %q %q %v", st, start, ok)
	}
	if _, again, _ := State(os.Getpid()); again != start {
		t.Errorf("start time %q, then %q", start, again)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := State(cmd.Process.Pid); ok {
		t.Errorf("pid %d of a reaped process is alive", cmd.Process.Pid)
	}
	if _, _, ok := State(0); ok {
		t.Error("pid 0 is alive")
	}
}

// Args reads the command line of a process of this user's, and nothing of a
// gone one.
func TestArgs(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no command lines here")
	}
	argv, ok := Args(os.Getpid())
	if !ok || !reflect.DeepEqual(argv, os.Args) {
		t.Errorf("Args(self) = %q, %v; want %q", argv, ok, os.Args)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if argv, ok := Args(cmd.Process.Pid); ok {
		t.Errorf("a reaped process has the command line %q", argv)
	}
	if os.Getuid() != 0 {
		if argv, ok := Args(1); ok {
			t.Errorf("init, not ours, has the command line %q", argv)
		}
	}
}

// A macOS kern.procargs2 buffer: argc, the executable's path, padding, argv,
// then the environment.
func TestParseProcArgs2(t *testing.T) {
	buf := binary.LittleEndian.AppendUint32(nil, 4)
	buf = append(buf, "/usr/local/bin/airlock\x00\x00\x00\x00airlock\x00--log-level\x00daemon\x00run\x00HOME=/Users/me\x00"...)
	if argv, want := parseProcArgs2(buf), []string{"airlock", "--log-level", "daemon", "run"}; !reflect.DeepEqual(argv, want) {
		t.Errorf("argv %q, want %q", argv, want)
	}
	for _, bad := range [][]byte{nil, {1, 0}, binary.LittleEndian.AppendUint32(nil, 3), append(binary.LittleEndian.AppendUint32(nil, 2), "/bin/x\x00x\x00"...)} {
		if got := parseProcArgs2(bad); got != nil {
			t.Errorf("%q parsed as %q", bad, got)
		}
	}
}
