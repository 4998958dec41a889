package e2e

import (
	"strings"
	"testing"
)

// TestSnapshotCommands: `airlock snapshot ID NAME` saves the sandbox,
// `airlock snapshots` lists it, `airlock create --from-snapshot NAME` starts a
// sandbox that has the files, `airlock fork ID -n 2` makes two copies that do
// not see each other's files, and `airlock snapshots rm` removes the
// snapshots once their sandboxes are gone.
func TestSnapshotCommands(t *testing.T) {
	limit(t)
	e := newEnv(t, byIDManifest)
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	var made []string
	t.Cleanup(func() {
		for _, sb := range append([]string{id}, made...) {
			e.Run("rm", "-f", sb)
		}
		for _, l := range strings.Split(e.Run("snapshots").Stdout, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[1] == id {
				e.Run("snapshots", "rm", f[0])
			}
		}
	})
	e.MustRun("exec", id, "--", "sh", "-c", "echo snapped > /tmp/snap.txt")
	name := "e2e-" + strings.ToLower(strings.ReplaceAll(id[:8], "_", "-"))
	if got := strings.TrimSpace(e.MustRun("snapshot", id, name).Stdout); got != name {
		t.Fatalf("snapshot printed %q, want %s", got, name)
	}
	if r := e.Run("snapshot", id, name); r.Code != 1 || !strings.Contains(r.Stderr, "exists") {
		t.Errorf("snapshot of a name in use: want exit 1 naming it, got %s", r)
	}
	if r := e.MustRun("snapshots"); !strings.Contains(r.Stdout, name) || !strings.Contains(r.Stdout, id) {
		t.Errorf("snapshots does not list %s of %s:\n%s", name, id, r.Stdout)
	}
	from := strings.TrimSpace(e.MustRun("create", "--from-snapshot", name).Stdout)
	made = append(made, from)
	if got := strings.TrimSpace(e.MustRun("exec", from, "--", "cat", "/tmp/snap.txt").Stdout); got != "snapped" {
		t.Errorf("a sandbox from the snapshot reads %q", got)
	}
	if r := e.Run("create", "--from-snapshot", "no-such-snapshot"); r.Code != 1 || !strings.Contains(r.Stderr, "no such snapshot") {
		t.Errorf("create from a missing snapshot: want exit 1, got %s", r)
	}
	copies := strings.Fields(e.MustRun("fork", id, "-n", "2").Stdout)
	made = append(made, copies...)
	if len(copies) != 2 {
		t.Fatalf("fork -n 2 printed %q", copies)
	}
	e.MustRun("exec", copies[0], "--", "sh", "-c", "echo mine > /tmp/own.txt")
	if r := e.Run("exec", copies[1], "--", "cat", "/tmp/own.txt"); r.Code == 0 {
		t.Errorf("a copy reads a file the other copy wrote: %s", r)
	}
	if got := strings.TrimSpace(e.MustRun("exec", copies[1], "--", "cat", "/tmp/snap.txt").Stdout); got != "snapped" {
		t.Errorf("a copy lacks the original's file: %q", got)
	}
	if r := e.Run("snapshots", "rm", name); r.Code != 1 || !strings.Contains(r.Stderr, "used by a container") {
		t.Errorf("snapshots rm of a snapshot in use: want exit 1, got %s", r)
	}
	forkSnap := ""
	for _, l := range strings.Split(e.MustRun("snapshots").Stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "fork-") {
			forkSnap = f[0]
		}
	}
	if forkSnap == "" {
		t.Fatal("snapshots does not list the fork's snapshot")
	}
	for _, sb := range []string{id, from, copies[0], copies[1]} {
		e.MustRun("rm", "-f", sb)
	}
	e.MustRun("snapshots", "rm", name, forkSnap)
	if r := e.MustRun("snapshots"); strings.Contains(r.Stdout, name) || strings.Contains(r.Stdout, forkSnap) {
		t.Errorf("snapshots lists removed ones:\n%s", r.Stdout)
	}
}
