package daemon

import (
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/internal/supervisorbin"
)

// supervisorEnv names the escape hatch: a static Linux airlock binary to inject
// instead of the embedded one (docs/sandbox.md).
const supervisorEnv = "AIRLOCK_SUPERVISOR_BINARY"

// embeddedSupervisors are the embedded binaries, hashed once per process.
var embeddedSupervisors sync.Map // arch -> *docker.Supervisor

// findSupervisor returns the supervisor to inject on an Engine of arch:
//
//  1. AIRLOCK_SUPERVISOR_BINARY, when set (checked to be a Linux binary for arch);
//  2. the linux/arch binary make build embedded;
//  3. this executable, when it is a static linux/arch binary (a plain go build
//     on the Engine's own kind of host, as the tests do);
//
// else an error that says how to get one.
func (d *assembly) findSupervisor(arch string) (*docker.Supervisor, error) {
	if bin, ok := d.getenv(supervisorEnv); ok && bin != "" {
		sup, err := docker.SupervisorFile(bin, arch, d.buildID, false)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", supervisorEnv, err)
		}
		return sup, nil
	}
	if gz := supervisorbin.Gzipped(arch); gz != nil {
		if sup, ok := embeddedSupervisors.Load(arch); ok {
			return sup.(*docker.Supervisor), nil
		}
		sup, err := docker.SupervisorGzip("the embedded linux/"+arch+" supervisor", gz)
		if err != nil {
			return nil, err
		}
		embeddedSupervisors.Store(arch, sup)
		return sup, nil
	}
	if runtime.GOOS == "linux" && runtime.GOARCH == arch {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("cannot find the airlock binary: %w", err)
		}
		sup, err := docker.SupervisorFile(exe, arch, d.buildID, true)
		if err != nil {
			return nil, fmt.Errorf("%w; or set %s to a static linux/%s airlock binary", err, supervisorEnv, arch)
		}
		return sup, nil
	}
	return nil, fmt.Errorf("this airlock build (%s/%s) has no linux/%s supervisor: build airlock with make build "+
		"(it embeds the linux/amd64 and linux/arm64 supervisors), or set %s to a static linux/%s airlock binary "+
		"(CGO_ENABLED=0 GOOS=linux GOARCH=%s go build ./cmd/airlock)",
		runtime.GOOS, runtime.GOARCH, arch, supervisorEnv, arch, arch)
}
