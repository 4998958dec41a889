package control

import (
	"strconv"

	"github.com/airlock-dev/airlock/sandbox"
)

// reapOrphans removes run sandboxes the store does not know (made before the
// daemon existed, or by a daemon whose store was lost) whose CLI is gone.
func (s *Service) reapOrphans() {
	for _, rt := range s.runtimes() {
		s.reapOrphansOn(rt)
	}
}

func (s *Service) reapOrphansOn(rt Backend) {
	list, err := rt.List(s.ctx, map[string]string{sandbox.LabelKind: sandbox.KindRun}, true)
	if err != nil {
		return
	}
	for _, in := range list {
		if _, err := s.store.Get(in.ID); err == nil {
			continue
		}
		pid, _ := strconv.Atoi(in.CLIPid)
		if pid <= 0 || processAlive(pid, in.CLIStart) {
			continue
		}
		s.log.Info("removing an unknown run sandbox whose CLI is gone", "sandbox", in.ID, "cli_pid", pid)
		_ = rt.Remove(s.ctx, in.ID)
	}
}
