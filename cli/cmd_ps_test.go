package cli

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// psRows splits ps's table into rows of cells (columns are two or more spaces apart).
func psRows(t *testing.T, out string) [][]string {
	t.Helper()
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1))
	}
	return rows
}

func TestPsTable(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{
		ID: "web1", Kind: "up", Project: "/src/web", CreatedAt: time.Now().Add(-90 * time.Minute),
		Daemons: client.DaemonCount{Up: 2, Total: 3},
		Ports: []client.Port{
			{HostIP: "127.0.0.1", HostPort: 18080, ContainerPort: 8080, Protocol: "tcp"},
			{HostIP: "::1", HostPort: 5353, ContainerPort: 53, Protocol: "udp"},
		},
		Labels: map[string]string{"team": "a", "ci": "yes"},
	})
	f.add(client.Sandbox{ID: "job2", State: client.StatePending, Kind: "run", Project: "/src/job", CreatedAt: time.Now().Add(-3 * 24 * time.Hour)})
	f.add(client.Sandbox{ID: "old3", State: client.StateStopped, Project: "/src/old"})

	r := f.run("ps")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("ps: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	got := psRows(t, r.stdout)
	want := [][]string{
		{"ID", "STATE", "KIND", "PROJECT", "AGE", "DAEMONS", "PORTS", "LABELS"},
		{"web1", "ready", "up", "/src/web", "1h", "2/3", "127.0.0.1:18080->8080/tcp, [::1]:5353->53/udp", "ci=yes,team=a"},
		{"job2", "pending", "run", "/src/job", "3d", "0/0"},
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("ps shows\n%s\nrows %q\nwant %q", r.stdout, got, want)
	}
	f.assertRequests("GET /v1/sandboxes")
}

func TestPsAllShowsStoppedAndFailedButNotDeleting(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "a1"})
	f.add(client.Sandbox{ID: "s2", State: client.StateStopped})
	f.add(client.Sandbox{ID: "f3", State: client.StateFailed})
	f.add(client.Sandbox{ID: "d4"})
	f.emit("d4", client.Event{Kind: "sandbox.deleting", State: client.StateDeleting})

	for _, c := range []struct {
		args []string
		ids  []string
	}{
		{[]string{"ps"}, []string{"a1"}},
		{[]string{"ps", "-a"}, []string{"a1", "s2", "f3"}},
		{[]string{"ps", "--all"}, []string{"a1", "s2", "f3"}},
	} {
		r := f.run(c.args...)
		if r.code != 0 {
			t.Fatalf("%q: exit %d, stderr:\n%s", c.args, r.code, r.stderr)
		}
		var ids []string
		for _, row := range psRows(t, r.stdout)[1:] {
			ids = append(ids, row[0])
		}
		if !slices.Equal(ids, c.ids) {
			t.Errorf("%q lists %q, want %q:\n%s", c.args, ids, c.ids, r.stdout)
		}
	}
}

func TestPsJSON(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	r := f.run("ps", "--json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("ps --json with no sandbox: exit %d, stdout %q, want []", r.code, r.stdout)
	}

	f.add(client.Sandbox{ID: "a1", Labels: map[string]string{"k": "v"}, DaemonNames: []string{"web"},
		Ports: []client.Port{{HostIP: "127.0.0.1", HostPort: 1, ContainerPort: 2, Protocol: "tcp"}}})
	f.add(client.Sandbox{ID: "s2", State: client.StateStopped})
	r = f.run("ps", "--json", "-a")
	if r.code != 0 {
		t.Fatalf("ps --json -a: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	var got []client.Sandbox
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("ps --json prints no JSON array: %v\n%s", err, r.stdout)
	}
	if len(got) != 2 || got[0].ID != "a1" || got[1].ID != "s2" {
		t.Fatalf("ps --json -a: %+v", got)
	}
	a := got[0]
	if a.State != "ready" || a.Labels["k"] != "v" || len(a.Ports) != 1 || a.Ports[0].HostPort != 1 || !slices.Equal(a.DaemonNames, []string{"web"}) || a.Engine == nil {
		t.Errorf("ps --json does not carry the daemon's record: %+v", a)
	}
	// The field names are the API's.
	for _, k := range []string{`"id"`, `"state"`, `"created_at"`, `"daemons"`, `"ports"`, `"host_port"`} {
		if !strings.Contains(r.stdout, k) {
			t.Errorf("ps --json has no %s:\n%s", k, r.stdout)
		}
	}
}

func TestPsLabelFilter(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "a1", Labels: map[string]string{"team": "a", "ci": "yes"}})
	f.add(client.Sandbox{ID: "b2", Labels: map[string]string{"team": "b"}})

	r := f.run("ps", "--label", "team=a", "--label", "ci=yes")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	rows := psRows(t, r.stdout)
	if len(rows) != 2 || rows[1][0] != "a1" {
		t.Errorf("ps --label team=a --label ci=yes:\n%s", r.stdout)
	}
	reqs := f.requests("GET /v1/sandboxes")
	if len(reqs) != 1 {
		t.Fatalf("want one list request, got:\n%s", f.requestList())
	}
	if got := reqs[0].Query["label"]; !slices.Equal(sortedCopy(got), []string{"ci=yes", "team=a"}) {
		t.Errorf("label filters sent: %q", got)
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

func TestPsBadLabelIsAUsageErrorBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	for _, l := range []string{"team", "=a", "dev.airlock.sandbox=x"} {
		r := f.run("ps", "--label", l)
		if r.code != ExitUsage || !strings.Contains(r.stderr, `invalid --label "`+l+`"`) {
			t.Errorf("ps --label %s: exit %d, stderr %q; want 2 and the label named", l, r.code, r.stderr)
		}
	}
	if reqs := f.requests(); len(reqs) != 0 {
		t.Errorf("a bad flag reached the daemon:\n%s", f.requestList())
	}
}

func TestPsEngineColumnOnlyWithSeveralEngines(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "a1", Engine: &client.Engine{Context: "desktop", Host: "unix:///nowhere/a.sock"}})
	r := f.run("ps")
	if strings.Contains(r.stdout, "ENGINE") {
		t.Errorf("ENGINE column with one Engine:\n%s", r.stdout)
	}
	f.add(client.Sandbox{ID: "b2", Engine: &client.Engine{Host: "tcp://build:2376"}})
	r = f.run("ps")
	rows := psRows(t, r.stdout)
	if len(rows) != 3 || rows[0][len(rows[0])-1] != "ENGINE" || rows[1][len(rows[1])-1] != "desktop" || rows[2][len(rows[2])-1] != "tcp://build:2376" {
		t.Errorf("ENGINE column (context, else host) with two Engines:\n%s", r.stdout)
	}
}

func TestPsDaemonErrorExits125(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.fail("GET", "/v1/sandboxes", &client.Error{Reason: client.ReasonInternal, Message: "cannot read the store: disk on fire"})
	r := f.run("ps")
	if r.code != ExitAirlock || r.stderr != "airlock: cannot read the store: disk on fire\n" || r.stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestPsUsage(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	for _, args := range [][]string{{"ps", "extra"}, {"ps", "--bogus"}} {
		if r := f.run(args...); r.code != ExitUsage {
			t.Errorf("%q: exit %d, want 2; stderr %q", args, r.code, r.stderr)
		}
	}
	if len(f.requests()) != 0 {
		t.Errorf("a usage error reached the daemon:\n%s", f.requestList())
	}
}

// An outdated daemon (another build) is replaced; this one reports no pid, so
// the CLI cannot stop it and says so (125) rather than starting a second one.
func TestPsOutdatedDaemonIsNotStartedOver(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.mu.Lock()
	f.health.BuildID = "other-build"
	f.mu.Unlock()
	r := f.run("ps")
	if r.code != ExitAirlock || !strings.Contains(r.stderr, "daemon outdated (build other-build -> "+BuildID+"), restarting...") ||
		!strings.Contains(r.stderr, "cannot stop the daemon: no pid") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	f.assertRequests()
}
