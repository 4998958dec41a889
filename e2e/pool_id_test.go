package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/client"
)

// TestWarmPoolRunIDLabels: `run --id ID --label K=V` takes a parked sandbox
// (no cold start): the run is sandbox ID, with its label, pool.claimed in its
// events, and the run's values; its host name is the parked sandbox's (its
// Engine objects keep that name); rm removes it, and a drain leaves nothing.
func TestWarmPoolRunIDLabels(t *testing.T) {
	limit(t)
	e := newEnv(t, poolManifest)
	t.Cleanup(func() { e.Run("pool", "drain") })
	if r := e.RunEnv([]string{"POOL_TOKEN=one"}, "pool", "warm"); r.Code != 0 {
		t.Fatalf("pool warm: %s", r)
	}
	parked := parkedIDs(e)
	id := "mine-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	r := e.RunEnv([]string{"POOL_TOKEN=two"}, "--log-level", "debug", "run", "--keep", "--id", id, "--label", "task=17", "--",
		"sh", "-c", `echo "$(hostname) $TOKEN"`)
	if r.Code != 0 {
		t.Fatalf("run --id --label: %s", r)
	}
	contains(t, "stderr", r.Stderr, "warm pool: hit")
	fields := strings.Fields(r.Stdout)
	if len(fields) != 2 || fields[1] != "two" || !slices.Contains(parked, fields[0]) {
		t.Errorf("the run printed %q; want a parked sandbox's host name (%v) and the run's value two", r.Stdout, parked)
	}
	contains(t, "events", e.MustRun("events", id).Stdout, "pool.claimed", "main.exited")
	var all []client.Sandbox
	if err := json.Unmarshal([]byte(e.MustRun("ps", "-a", "--json").Stdout), &all); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(s client.Sandbox) bool { return s.ID == id })
	if i < 0 || all[i].Labels["task"] != "17" {
		t.Errorf("ps -a: no sandbox %s labelled task=17: %+v", id, all)
	}
	e.MustRun("rm", id)
}
