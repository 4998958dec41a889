package docker

import (
	"fmt"
	"os"
	"testing"

	"github.com/airlock-dev/airlock/test/testenv"
)

// rigBuildID is the build ID of the rig's runtimes (newRig): with the test
// binary, it names the supervisor volume they share.
const rigBuildID = "sandbox-test"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "airlock-sandbox-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot create a temporary folder:", err)
		os.Exit(1)
	}
	testBin.dir = dir
	code := testenv.RunClean(m)
	removeRigSupervisorVolume()
	os.RemoveAll(dir)
	os.Exit(code)
}

// removeRigSupervisorVolume removes the supervisor volume the rig's runtimes
// filled from the test binary, so that a run leaves nothing on the Engine
// (best effort: one a leftover container uses stays).
func removeRigSupervisorVolume() {
	if testBin.path == "" {
		return
	}
	testenv.RemoveSupervisorVolume(func(machine string) (string, error) {
		arch := GoArch(machine)
		sup, err := SupervisorFile(testBin.path, arch, rigBuildID, false)
		if err != nil {
			return "", err
		}
		return SupervisorVolumeName(sup, arch), nil
	})
}
