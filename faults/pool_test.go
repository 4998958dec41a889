//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

// poolManifest is a plain manifest with a warm pool of size.
func poolManifest(size int) string {
	return fmt.Sprintf(`
[sandbox]
image = "{{image}}"
network = "none"

[sandbox.pool]
size = %d
`, size)
}

// poolScript is the main command of the pool scenarios: it prints its sandbox
// (the hostname is the sandbox's ID) and "ok", and exits 3.
const poolScript = "hostname; echo ok; exit 3"

// poolRunOK says whether a run of poolScript gave the right result, and the
// sandbox it ran in.
func poolRunOK(r result) (ok bool, host string) {
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) >= 1 {
		host = strings.TrimSpace(lines[0])
	}
	return r.Code == 3 && len(lines) == 2 && lines[1] == "ok", host
}

// pool is this project's entry of `airlock pool ls --json`, and the list.
func (e *env) pool() (client.Pool, client.PoolList) {
	e.T.Helper()
	var list client.PoolList
	r := e.MustRun("pool", "ls", "--json")
	if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
		e.T.Fatalf("pool ls --json: %v\n%s", err, r)
	}
	for _, p := range list.Pools {
		if p.Project == e.Project {
			return p, list
		}
	}
	return client.Pool{}, list
}

// parkedIDs are the sandboxes `ps --pool` shows parked for the project.
func (e *env) parkedIDs() []string {
	e.T.Helper()
	var all []client.Sandbox
	r := e.MustRun("ps", "--pool", "--json")
	if err := json.Unmarshal([]byte(r.Stdout), &all); err != nil {
		e.T.Fatalf("ps --pool --json: %v\n%s", err, r)
	}
	var out []string
	for _, s := range all {
		if s.Kind == "pool" && s.Project == e.Project && s.State == "parked" {
			out = append(out, s.ID)
		}
	}
	return out
}

// awaitReady waits until the project's pool has n ready sandboxes and nothing
// being made, and returns how long that took.
func (e *env) awaitReady(n int, within time.Duration) (time.Duration, client.Pool) {
	e.T.Helper()
	start := time.Now()
	for {
		p, _ := e.pool()
		if p.Ready == n && p.Starting == 0 {
			return time.Since(start), p
		}
		if time.Since(start) > within {
			e.T.Fatalf("the pool did not get back to %d ready within %v: %+v", n, within, p)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pooledContainers lists the primary containers of the projects of envs on
// the Engine that carry a pool label (parked, being made, or claimed by a
// run: the label stays).
func pooledContainers(t *testing.T, envs ...*env) []container.Summary {
	t.Helper()
	var out []container.Summary
	for _, e := range envs {
		list, err := e.Cli.ContainerList(context.Background(), container.ListOptions{All: true,
			Filters: filters.NewArgs(filters.Arg("label", backend.LabelPool), filters.Arg("label", backend.LabelRole+"=primary"),
				filters.Arg("label", labelProject+"="+e.Project))})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, list...)
	}
	return out
}

// killParked kills (docker kill) the primary container of parked sandbox id.
func killParked(t *testing.T, e *env, id string) {
	t.Helper()
	for _, c := range e.Containers() {
		if c.Labels[backend.LabelSandbox] == id && c.Labels[backend.LabelRole] == "primary" {
			if err := e.Cli.ContainerKill(context.Background(), c.ID, "SIGKILL"); err != nil {
				t.Fatalf("cannot kill %s: %v", id, err)
			}
			return
		}
	}
	t.Fatalf("no primary container for the parked sandbox %s", id)
}

// TestPoolKillDaemon: with a warm pool, kill -9 of the control daemon during a
// run that takes a parked sandbox: at the run's sandbox.accepted, pool.claimed
// and sandbox.started events (seen through the API), and at moments spread
// over a warm run. Each run returns 3 with "ok" or fails with exit 125 and a
// message, within 2 minutes; after `pool drain` nothing of the run or of the
// old pool is left on the Engine; a run afterwards works.
func TestPoolKillDaemon(t *testing.T) {
	e := newEnv(t, poolManifest(2))
	t.Cleanup(func() { e.Run("pool", "drain") })
	e.MustRun("pool", "warm")
	// A warm run's time (the fastest of 3), less 10 %.
	var span time.Duration
	for range 3 {
		e.awaitReady(2, 2*time.Minute)
		r := e.Run("run", "--", "sh", "-c", poolScript)
		if ok, _ := poolRunOK(r); !ok {
			t.Fatalf("baseline warm run: %s", r)
		}
		if span == 0 || r.Took < span {
			span = r.Took
		}
	}
	span = span * 9 / 10

	type try struct {
		at    time.Duration // a moment from the CLI's start, or
		event string        // the run's event after which the daemon is killed
	}
	var tries []try
	for _, ev := range []string{"sandbox.accepted", "pool.claimed", "sandbox.started"} {
		tries = append(tries, try{event: ev}, try{event: ev})
	}
	for _, at := range moments(10, span) {
		tries = append(tries, try{at: at})
	}

	var right, failedClean, hung, leftRuns, vanished int
	codes, wrong, messages, byEvent := &tally{}, &tally{}, &tally{}, &tally{}
	var worst time.Duration
	for i, tr := range tries {
		what := fmt.Sprintf("kill %d (at %v)", i+1, tr.at)
		if tr.event != "" {
			what = fmt.Sprintf("kill %d (after %s)", i+1, tr.event)
		}
		e.MustRun("pool", "warm") // starts the daemon if need be
		e.awaitReady(2, 2*time.Minute)
		pid, alive := e.DaemonPID()
		if !alive {
			t.Fatalf("%s: no daemon after pool warm", what)
		}
		parked := e.parkedIDs()
		p := e.Start("run", "--", "sh", "-c", poolScript)
		if tr.event != "" {
			seen := awaitPooledEvent(e, parked, tr.event, 30*time.Second)
			if seen == "" {
				t.Logf("%s: the event was not seen (the run took no parked sandbox?)", what)
			}
		} else {
			time.Sleep(tr.at - time.Since(p.Started))
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Errorf("%s: cannot kill the daemon %d: %v", what, pid, err)
		}
		r, ok := p.Wait(2 * time.Minute)
		if !ok {
			hung++
			t.Errorf("%s: the CLI did not end within 2 min\n%s", what, r)
		}
		codes.add(fmt.Sprint(r.Code))
		if tr.event != "" {
			byEvent.add(fmt.Sprintf("after %s: %d", tr.event, r.Code))
		}
		good, _ := poolRunOK(r)
		msg := mdEscape(firstLine(r.Stderr))
		switch {
		case good:
			right++
		case ok && r.Code == 125 && msg != "":
			failedClean++
			messages.add(idPattern.ReplaceAllString(msg, "ID"))
		default:
			if msg == "" {
				msg = "no message on stderr"
			}
			wrong.add(fmt.Sprintf("exit %d (%s)", r.Code, msg))
			t.Errorf("%s: want exit 3 with ok, or 125 with a message; got %s\nevents:\n%s", what, r, e.eventsOf(parked))
		}
		if _, err := os.Stat(filepath.Join(e.Project, "sandbox.toml")); err != nil {
			// Seen twice in ~50 kills, not explained yet: recorded, and the
			// manifest written again for the next kills.
			vanished++
			var mtime string
			if fi, err := os.Stat(e.Project); err == nil {
				mtime = fi.ModTime().UTC().Format("15:04:05.000")
			}
			t.Errorf("%s: the project's sandbox.toml is gone (%v; the project dir was last changed at %s); CLI: %s\nevents:\n%s", what, err, mtime, r, e.eventsOf(parked))
			e.WriteManifest(poolManifest(2))
		}
		// The next command starts a daemon; the pool is drained (the old
		// pool's parked sandboxes are the new daemon's leftovers).
		e.MustRun("pool", "drain")
		left, took := e.leftoversAfter(leftoverGrace)
		if len(left) > 0 {
			leftRuns++
			t.Errorf("%s: %d object(s) left after %v: %v", what, len(left), took, left)
			testenv.ForceRemove(e.Cli, labelProject, e.Project)
		} else {
			worst = max(worst, took)
		}
	}
	// A run afterwards works, cold (drained) and warm.
	after := "cold and warm runs afterwards return 3 with ok"
	if r := e.Run("run", "--", "sh", "-c", poolScript); !okOnly(poolRunOK(r)) {
		after = "a cold run afterwards failed"
		t.Errorf("cold run after the kills: %s", r)
	}
	e.MustRun("pool", "warm")
	parked := e.parkedIDs()
	if r := e.Run("run", "--", "sh", "-c", poolScript); !okOnly(poolRunOK(r)) {
		after = "a warm run afterwards failed"
		t.Errorf("warm run after the kills: %s", r)
	} else if _, host := poolRunOK(r); !slices.Contains(parked, host) {
		t.Logf("the run after warm got %s, not one of the parked %v", host, parked)
	}
	e.MustRun("pool", "drain")
	left, _ := e.leftoversAfter(leftoverGrace)
	if len(left) > 0 {
		t.Errorf("%d object(s) left at the end: %v", len(left), left)
	}
	states := &tally{}
	for _, p := range e.PS() {
		states.add(p.State)
	}
	n := len(tries)
	record(t, "kill -9 of the control daemon during a warm run", fmt.Sprintf("A pool of 2 parked sandboxes (`pool warm`), then `airlock run -- sh -c '%s'`; the daemon killed with SIGKILL 6 times just after the run's `sandbox.accepted`, `pool.claimed` or `sandbox.started` event appeared (2 each, polled through the API), and 10 times at moments spread evenly over [0, %v) (90 %% of a warm run) from the CLI's start. After each kill `pool drain` (which starts the next daemon), then the suite polls the Engine for objects labelled with the project.", poolScript, span.Round(time.Millisecond)),
		[]benchdoc.Row{
			{Measure: "runs returning 3 with ok, or 125 with a message", Result: fmt.Sprintf("%d/%d (3: %d, 125: %d)", right+failedClean, n, right, failedClean), Target: fmt.Sprintf("%d/%d", n, n)},
			{Measure: "exit codes", Result: codes.String()},
			{Measure: "exit codes of the kills at an event", Result: byEvent.String()},
			{Measure: "messages of the runs that failed", Result: messages.String()},
			{Measure: "wrong results", Result: wrong.String(), Target: "none"},
			{Measure: "CLIs still running after 2 min", Result: fmt.Sprint(hung), Target: "0"},
			{Measure: "kills after which the project's sandbox.toml was gone", Result: fmt.Sprint(vanished), Target: "0"},
			{Measure: "kills with Engine objects left 10 s after the drain", Result: fmt.Sprint(leftRuns), Target: "0"},
			{Measure: "slowest clean-up after the drain", Result: ms(worst), Target: "≤ 10 s"},
			{Measure: "afterwards", Result: after + fmt.Sprintf("; nothing left after a drain: %v; `ps -a` states: %s", len(left) == 0, states), Target: "works, nothing left"},
		}, "")
}

// eventsOf is `airlock events` of the sandboxes of ids that have any (the
// one a run claimed).
func (e *env) eventsOf(ids []string) string {
	var b strings.Builder
	// And every other sandbox the daemon knows (a run whose making a kill cut
	// short goes on in another one).
	if r := e.Run("ps", "-a"); r.Code == 0 {
		for _, id := range idPattern.FindAllString(r.Stdout, -1) {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	for _, id := range ids {
		if r := e.Run("events", id); r.Code == 0 && strings.TrimSpace(r.Stdout) != "" {
			fmt.Fprintf(&b, "%s:\n%s", id, r.Stdout)
		}
	}
	// And the daemons' log, of the last minutes.
	if log, err := os.ReadFile(filepath.Join(e.Paths().DaemonDir(), "airlockd.log")); err == nil {
		lines := strings.Split(string(log), "\n")
		fmt.Fprintf(&b, "daemon log (last 60 lines):\n%s\n", strings.Join(lines[max(0, len(lines)-60):], "\n"))
	}
	return b.String()
}

// idPattern matches a sandbox ID (left out of the tally of messages).
var idPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// missesOf is a pool's misses by reason ("none" when none).
func missesOf(p client.Pool) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(p.Misses)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, p.Misses[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func okOnly(ok bool, _ string) bool { return ok }

// awaitPooledEvent polls the daemon's API for the events of the parked
// sandboxes ids (a run's sandbox is the parked one's ID) until one has an
// event of kind; it returns that sandbox, or "" after within.
func awaitPooledEvent(e *env, ids []string, kind string, within time.Duration) string {
	c := client.New(e.Socket())
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for ctx.Err() == nil {
		for _, id := range ids {
			evs, _ := c.History(ctx, id, 0)
			if slices.ContainsFunc(evs, func(ev client.Event) bool { return ev.Kind == kind }) {
				return id
			}
		}
		time.Sleep(time.Millisecond)
	}
	return ""
}

// TestPoolKillParked: `docker kill` of a parked primary, each time just before
// a run: the dead one is never handed out, the pool replaces it (failures
// counted, ready back to its size), the runs return 3 with ok.
func TestPoolKillParked(t *testing.T) {
	e := newEnv(t, poolManifest(2))
	t.Cleanup(func() { e.Run("pool", "drain") })
	e.MustRun("pool", "warm")
	const rounds = 6
	var right, handedOut, hits int
	var slowest time.Duration
	var last client.Pool
	for i := range rounds {
		e.awaitReady(2, 2*time.Minute)
		parked := e.parkedIDs()
		if len(parked) != 2 {
			t.Fatalf("round %d: %d parked, want 2: %v", i+1, len(parked), parked)
		}
		// Alternately the first and the second parked one: the one a run
		// takes first, or the other.
		victim := parked[i%2]
		killParked(t, e, victim)
		r := e.Run("run", "--", "sh", "-c", poolScript)
		ok, host := poolRunOK(r)
		if ok {
			right++
		} else {
			t.Errorf("round %d: run after killing %s: %s", i+1, victim, r)
		}
		if host == victim {
			handedOut++
			t.Errorf("round %d: the run got the killed parked sandbox %s", i+1, victim)
		}
		if slices.Contains(parked, host) {
			hits++
		}
		took, p := e.awaitReady(2, 2*time.Minute)
		slowest = max(slowest, took)
		if slices.Contains(e.parkedIDs(), victim) {
			t.Errorf("round %d: the killed %s is still parked", i+1, victim)
		}
		last = p
	}
	if last.Failures < 1 {
		t.Errorf("pool ls counts %d failures after %d parked containers were killed: %+v", last.Failures, rounds, last)
	}
	e.MustRun("pool", "drain")
	left, _ := e.leftoversAfter(leftoverGrace)
	if len(left) > 0 {
		t.Errorf("%d object(s) left after the drain: %v", len(left), left)
	}
	record(t, "a parked container killed", fmt.Sprintf("A pool of 2; %d rounds of `docker kill` of a parked primary (alternately the first and the second parked one) followed at once by `airlock run -- sh -c '%s'`; then the suite waits for the pool to be back to 2 ready.", rounds, poolScript),
		[]benchdoc.Row{
			{Measure: "runs returning 3 with ok", Result: fmt.Sprintf("%d/%d", right, rounds), Target: fmt.Sprintf("%d/%d", rounds, rounds)},
			{Measure: "runs handed the killed sandbox", Result: fmt.Sprint(handedOut), Target: "0"},
			{Measure: "runs served by the other parked one (hits)", Result: fmt.Sprintf("%d/%d", hits, rounds)},
			{Measure: "`pool ls` failures, hits, misses at the end", Result: fmt.Sprintf("%d, %d, %s", last.Failures, last.Hits, missesOf(last)), Target: "failures ≥ 1"},
			{Measure: "slowest return to 2 ready after a run", Result: ms(slowest)},
			{Measure: "Engine objects left after `pool drain`", Result: fmt.Sprint(len(left)), Target: "0"},
		}, "")
}

// TestPoolMax: runtime.pool_max = 3 and two projects with pools of 2: the
// parked sandboxes never exceed 3, the warm that cannot fill says why (naming
// runtime.pool_max), runs of both projects are right, drain --all leaves
// nothing.
func TestPoolMax(t *testing.T) {
	a := newEnv(t, poolManifest(2))
	if err := os.MkdirAll(filepath.Join(a.Config, "airlock"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.Config, "airlock", "config.toml"), []byte("[runtime]\npool_max = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The second project: the same user (so the same daemon).
	b := &env{&clitest.Env{T: t, Cli: a.Cli, Image: a.Image, Dirs: a.Dirs, Project: filepath.Join(filepath.Dir(a.Project), "project2")}}
	if err := os.MkdirAll(b.Project, 0o777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(b.Project, 0o777)
	b.WriteManifest(poolManifest(2))
	t.Cleanup(func() { testenv.ForceRemove(a.Cli, labelProject, b.Project) })
	t.Cleanup(func() { a.Run("pool", "drain", "--all") })

	// A sampler of what is parked: the daemon's count and the Engine's
	// pooled primaries that no run claimed.
	claimed := map[string]bool{}
	var maxDaemon, maxEngine, samples int
	sample := func() {
		_, list := a.pool()
		maxDaemon = max(maxDaemon, list.Pooled)
		n := 0
		for _, c := range pooledContainers(t, a, b) {
			if !claimed[c.Labels[backend.LabelSandbox]] {
				n++
			}
		}
		maxEngine = max(maxEngine, n)
		samples++
	}

	ra := a.Run("pool", "warm")
	sample()
	if ra.Code != 0 {
		t.Fatalf("pool warm of the first project: %s", ra)
	}
	rb := b.Run("pool", "warm")
	sample()
	warmB := fmt.Sprintf("exit %d: %s", rb.Code, mdEscape(firstLine(rb.Stderr)))
	if rb.Code == 0 || !strings.Contains(rb.Stderr, "runtime.pool_max") {
		t.Errorf("pool warm of the second project with 1 place left: want a failure naming runtime.pool_max, got %s", rb)
	}
	pb, _ := b.pool()
	if pb.Ready != 1 {
		t.Errorf("the second project's pool holds %d ready, want 1 (the last free place): %+v", pb.Ready, pb)
	}

	// Runs of both, one after the other, sampling in between.
	const n = 4
	var right int
	for i := range n {
		for _, x := range []*env{a, b} {
			r := x.Run("run", "--", "sh", "-c", poolScript)
			ok, host := poolRunOK(r)
			claimed[host] = true
			if ok {
				right++
			} else {
				t.Errorf("run %d of %s: %s", i+1, x.Project, r)
			}
			sample()
		}
	}
	// Let the refills settle, sampling.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		sample()
	}
	_, list := a.pool()
	settled := fmt.Sprintf("%d pooled", list.Pooled)
	for _, p := range list.Pools {
		settled += fmt.Sprintf("; %s: %d ready", filepath.Base(p.Project), p.Ready)
	}
	if maxDaemon > 3 || maxEngine > 3 {
		t.Errorf("pool_max 3 exceeded: the daemon counted up to %d, the Engine showed up to %d", maxDaemon, maxEngine)
	}
	a.MustRun("pool", "drain", "--all")
	la, _ := a.leftoversAfter(leftoverGrace)
	lb, _ := b.leftoversAfter(leftoverGrace)
	if len(la)+len(lb) > 0 {
		t.Errorf("after drain --all: left %v %v", la, lb)
	}
	record(t, "runtime.pool_max reached", "`[runtime] pool_max = 3`; two projects with `[sandbox.pool] size = 2`: `pool warm` of the first, then of the second, then 4 runs of `sh -c '"+poolScript+"'` in each, alternately; what is parked is sampled after each command and for 15 s after (the daemon's `pooled`, and the Engine's pooled primaries no run claimed).",
		[]benchdoc.Row{
			{Measure: "`pool warm` of the second project", Result: warmB, Target: "fails naming runtime.pool_max"},
			{Measure: "most parked at once: daemon / Engine", Result: fmt.Sprintf("%d / %d (%d samples)", maxDaemon, maxEngine, samples), Target: "≤ 3"},
			{Measure: "runs returning 3 with ok", Result: fmt.Sprintf("%d/%d", right, 2*n), Target: fmt.Sprintf("%d/%d", 2*n, 2*n)},
			{Measure: "after the runs", Result: settled},
			{Measure: "Engine objects left after `pool drain --all`", Result: fmt.Sprint(len(la) + len(lb)), Target: "0"},
		}, "")
}
