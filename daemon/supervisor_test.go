package daemon

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/supervisorbin"
)

// The supervisor for an Engine's architecture: the embedded one when this
// build has it, AIRLOCK_SUPERVISOR_BINARY before anything (checked), and for an
// architecture nothing provides, an error that says how to get one.
func TestFindSupervisor(t *testing.T) {
	env := map[string]string{}
	d := &assembly{getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}

	_, err := d.findSupervisor("s390x")
	if err == nil || !strings.Contains(err.Error(), "no linux/s390x supervisor") ||
		!strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), supervisorEnv) {
		t.Errorf("an architecture nothing provides: %v, want an error that says how to get a supervisor", err)
	}

	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	sup, err := d.findSupervisor(other)
	switch {
	case supervisorbin.Embedded():
		if err != nil || !strings.Contains(sup.Source, "embedded linux/"+other) || sup.Size < 1<<20 {
			t.Errorf("linux/%s in a build that embeds it: %+v, %v", other, sup, err)
		}
		again, _ := d.findSupervisor(other)
		if again != sup {
			t.Error("the embedded supervisor is hashed again on each use")
		}
	default:
		if err == nil || !strings.Contains(err.Error(), "no linux/"+other+" supervisor") {
			t.Errorf("linux/%s in a build without embedded supervisors: %v, want an error", other, err)
		}
	}

	// The override wins, and must be a Linux binary for the architecture.
	notLinux := filepath.Join(t.TempDir(), "airlock")
	if err := os.WriteFile(notLinux, []byte("#!/bin/sh\necho not a supervisor\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env[supervisorEnv] = notLinux
	if _, err := d.findSupervisor(other); err == nil || !strings.Contains(err.Error(), supervisorEnv) || !strings.Contains(err.Error(), "not a Linux binary") {
		t.Errorf("%s=%s: %v, want a refusal naming the variable", supervisorEnv, notLinux, err)
	}
}
