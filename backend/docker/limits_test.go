package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
)

// infoEngine answers Info (counting the calls); every other call panics.
type infoEngine struct {
	client.APIClient
	info  system.Info
	calls int
}

func (e *infoEngine) Info(context.Context) (system.Info, error) {
	e.calls++
	return e.info, nil
}

// TestLimitsRefusedWhereNotApplied: an Engine that says it cannot apply a
// memory or CPU limit (rootless Docker on cgroup v1 accepts them and applies
// nothing: a memory hog ran past memory = "32m") refuses the sandbox that
// asks for one, naming the key and why; an Engine that applies them, or a
// manifest that asks for none, is not refused. The Engine is asked once.
func TestLimitsRefusedWhereNotApplied(t *testing.T) {
	rootless := &infoEngine{info: system.Info{MemoryLimit: false, CPUCfsQuota: false, CgroupDriver: "none", SecurityOptions: []string{"name=rootless"}}}
	rt := &Runtime{Engine: rootless}
	for _, c := range []struct{ body, want string }{
		{"memory = \"32m\"", "cannot apply sandbox.memory: the Engine (rootless, cgroup driver none) does not apply memory limits"},
		{"cpus = 0.5", "cannot apply sandbox.cpus: the Engine (rootless, cgroup driver none) does not apply CPU limits"},
	} {
		r := loadBytes(t, "[sandbox]\nimage = \"x\"\n"+c.body+"\n", nil)
		err := rt.kind().limitsSupported(context.Background(), r)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.body, err, c.want)
		}
	}
	if err := rt.kind().limitsSupported(context.Background(), loadBytes(t, "[sandbox]\nimage = \"x\"\n", nil)); err != nil {
		t.Errorf("no limit asked: %v", err)
	}
	if rootless.calls != 1 {
		t.Errorf("Info asked %d times; want once", rootless.calls)
	}
	full := &Runtime{Engine: &infoEngine{info: system.Info{MemoryLimit: true, CPUCfsQuota: true, CgroupDriver: "cgroupfs"}}}
	if err := full.kind().limitsSupported(context.Background(), loadBytes(t, "[sandbox]\nimage = \"x\"\nmemory = \"32m\"\ncpus = 0.5\n", nil)); err != nil {
		t.Errorf("an Engine that applies limits: %v", err)
	}
}
