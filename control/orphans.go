package control

import (
	"strconv"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
)

// reapOrphans removes run sandboxes the store does not know (made before the
// daemon existed, or by a daemon whose store was lost) whose CLI is gone, and
// the objects of run sandboxes the store records as deleted.
func (rp *reaper) reapOrphans() {
	for _, rt := range rp.runtimes() {
		rp.reapOrphansOn(rt)
	}
}

func (rp *reaper) reapOrphansOn(rt backend.Backend) {
	list, err := rt.List(rp.ctx(), map[string]string{backend.LabelKind: backend.KindRun}, true)
	if err != nil {
		return
	}
	for _, in := range list {
		if rec, err := rp.store.Get(in.ID); err == nil {
			if rec.State == store.StateDeleted {
				// Objects of a deleted sandbox, made after its removal: a
				// create the Engine finished for a daemon killed meanwhile.
				rp.log().Info("removing what remains of a deleted run sandbox", "sandbox", in.ID)
				_ = rt.Remove(rp.ctx(), in.ID)
			}
			continue
		}
		pid, _ := strconv.Atoi(in.CLIPid)
		if pid <= 0 || processAlive(pid, in.CLIStart) {
			continue
		}
		rp.log().Info("removing an unknown run sandbox whose CLI is gone", "sandbox", in.ID, "cli_pid", pid)
		_ = rt.Remove(rp.ctx(), in.ID)
	}
}
