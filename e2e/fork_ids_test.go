package e2e

import (
	"strings"
	"testing"
)

// TestForkIDs: `airlock fork ID --id A --id B` names the copies; a fork whose
// second copy's ID is in use (the original's own) fails, and leaves neither
// the first copy nor the fork's snapshot.
func TestForkIDs(t *testing.T) {
	limit(t)
	e := newEnv(t, byIDManifest)
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	suffix := strings.ToLower(strings.ReplaceAll(id[:8], "_", "-"))
	first, ok := "fork-a-"+suffix, "fork-b-"+suffix
	t.Cleanup(func() {
		for _, sb := range []string{id, first, ok} {
			e.Run("rm", "-f", sb)
		}
		for _, l := range strings.Split(e.Run("snapshots").Stdout, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[1] == id {
				e.Run("snapshots", "rm", f[0])
			}
		}
	})
	r := e.Run("fork", id, "--id", first, "--id", id)
	if r.Code == 0 || !strings.Contains(r.Stderr, id) {
		t.Errorf("fork with the original's ID for a copy: want a failure naming it, got %s", r)
	}
	for _, p := range e.PS() {
		if p.ID == first {
			t.Errorf("the first copy of a failed fork is listed: %+v", p)
		}
	}
	if out := e.MustRun("snapshots").Stdout; strings.Contains(out, id) {
		t.Errorf("a failed fork left its snapshot:\n%s", out)
	}
	if got := strings.Fields(e.MustRun("fork", id, "--id", ok).Stdout); len(got) != 1 || got[0] != ok {
		t.Errorf("fork --id %s printed %q", ok, got)
	}
}
