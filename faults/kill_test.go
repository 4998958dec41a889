//go:build faults

package faults

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/test/testenv"
)

const plainManifest = `
[sandbox]
image = "{{image}}"
`

// baseline warms the environment up (daemon, supervisor volume) and returns how
// long one run of script takes from start to exit (the fastest of 3), less 10 %
// so that the last moments still find the CLI running.
func (e *env) baseline(script string, code int) time.Duration {
	e.T.Helper()
	e.MustRun("run", "--", "true")
	var best time.Duration
	for range 3 {
		r := e.Run("run", "--", "sh", "-c", script)
		if r.Code != code {
			e.T.Fatalf("baseline run: want exit %d, got %s", code, r)
		}
		if best == 0 || r.Took < best {
			best = r.Took
		}
	}
	if left, _ := e.leftoversAfter(leftoverGrace); len(left) > 0 {
		e.T.Fatalf("baseline runs left %v", left)
	}
	return best * 9 / 10
}

// TestKillCLI: kill -9 of `airlock run` at 20 moments spread from setup to exit;
// the daemon's reaper removes every object within 10 s.
func TestKillCLI(t *testing.T) {
	e := newEnv(t, plainManifest)
	const script = "sleep 1; exit 0"
	span := e.baseline(script, 0)
	var clean, exitedFirst int
	var worst time.Duration
	var lines []string
	for i, at := range moments(20, span) {
		p := e.Start("run", "--", "sh", "-c", script)
		time.Sleep(at - time.Since(p.Started))
		killed := p.Cmd.Process.Signal(syscall.SIGKILL) == nil
		r, _ := p.Wait(time.Minute)
		if !killed || r.Code != -1 {
			exitedFirst++
			t.Logf("kill %d at %v: the CLI had ended before the kill, %v after its start: %s", i+1, at, r.Took, r)
		}
		states := e.containerStates()
		left, took := e.leftoversAfter(leftoverGrace)
		if len(left) == 0 {
			clean++
			worst = max(worst, took)
		} else {
			t.Errorf("kill %d at %v: %d object(s) left after %v: %v\nCLI: %s", i+1, at, len(left), took, left, r)
			testenv.ForceRemove(e.Cli, labelProject, e.Project)
		}
		lines = append(lines, fmt.Sprintf("%v: containers at kill %v, gone in %v", at.Round(time.Millisecond), states, took.Round(10*time.Millisecond)))
	}
	t.Logf("moments:\n  %s", strings.Join(lines, "\n  "))
	var notGone int
	for _, p := range e.PS() {
		if p.State != "deleted" {
			notGone++
		}
	}
	record(t, "kill -9 of the CLI during run", fmt.Sprintf("`airlock run -- sh -c '%s'` (90 %% of an unkilled run: %v) killed with SIGKILL at 20 moments spread evenly over [0, %v) from the CLI's start; after each kill the suite polls the Engine for objects labelled with the project.", script, span.Round(time.Millisecond), span.Round(time.Millisecond)),
		[]benchdoc.Row{
			{Measure: "runs with 0 Engine objects left within 10 s", Result: fmt.Sprintf("%d/20", clean), Target: "20/20"},
			{Measure: "slowest clean-up after a kill", Result: ms(worst), Target: "≤ 10 s"},
			{Measure: "CLIs that exited before their kill", Result: fmt.Sprint(exitedFirst)},
			{Measure: "`ps -a` records of the project not deleted afterwards", Result: fmt.Sprint(notGone)},
		}, "")
}

// TestKillDaemon: kill -9 of the control daemon at 10 moments of runs that exit
// 3; every CLI returns 3, no record is failed, nothing is left.
func TestKillDaemon(t *testing.T) {
	e := newEnv(t, plainManifest)
	const script = "sleep 1; exit 3"
	span := e.baseline(script, 3)
	var right int
	codes, phases, wrong := &tally{}, &tally{}, &tally{}
	var leftRuns int
	var worst time.Duration
	for i, at := range moments(10, span) {
		if _, ok := e.DaemonPID(); !ok {
			e.MustRun("daemon", "start")
		}
		pid, _ := e.DaemonPID()
		p := e.Start("run", "--", "sh", "-c", script)
		time.Sleep(at - time.Since(p.Started))
		states := e.containerStates()
		phase := "no container yet"
		if len(states) > 0 {
			phase = "container " + strings.Join(states, ",")
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Errorf("kill %d: cannot kill the daemon %d: %v", i+1, pid, err)
		}
		r, ok := p.Wait(2 * time.Minute)
		if !ok {
			t.Errorf("kill %d at %v: the CLI did not end within 2 min\n%s", i+1, at, r)
		}
		codes.add(fmt.Sprint(r.Code))
		phases.add(phase)
		if r.Code == 3 {
			right++
		} else {
			msg := firstLine(r.Stderr)
			if msg == "" {
				msg = "no message on stderr"
			}
			wrong.add(fmt.Sprintf("exit %d (%s; %s)", r.Code, phase, mdEscape(msg)))
			t.Errorf("kill %d at %v (%s): want exit 3, got %s", i+1, at, phase, r)
		}
		left, took := e.leftoversAfter(leftoverGrace)
		if len(left) > 0 {
			leftRuns++
			t.Errorf("kill %d at %v: %d object(s) left after %v: %v", i+1, at, len(left), took, left)
			testenv.ForceRemove(e.Cli, labelProject, e.Project)
		} else {
			worst = max(worst, took)
		}
	}
	failed, states := e.assertNoFailedRecords(t)
	record(t, "kill -9 of the control daemon during run", fmt.Sprintf("`airlock run -- sh -c '%s'` (90 %% of an undisturbed run: %v); the daemon (pid file) killed with SIGKILL at 10 moments spread evenly over [0, %v) from the CLI's start. The phase is what the Engine showed just before the kill.", script, span.Round(time.Millisecond), span.Round(time.Millisecond)),
		[]benchdoc.Row{
			{Measure: "CLIs returning the main command's 3", Result: fmt.Sprintf("%d/10", right), Target: "10/10"},
			{Measure: "exit codes", Result: codes.String()},
			{Measure: "phase at the kill", Result: phases.String()},
			{Measure: "runs not returning 3, by phase", Result: wrong.String(), Target: "none"},
			{Measure: "`failed` records in `ps -a` afterwards", Result: fmt.Sprintf("%d (states: %s)", failed, states), Target: "0"},
			{Measure: "runs with Engine objects left after 10 s", Result: fmt.Sprint(leftRuns), Target: "0"},
			{Measure: "slowest clean-up", Result: ms(worst), Target: "≤ 10 s"},
		}, "")
}

// TestConcurrentRuns: 20 runs at once with distinct exit codes.
func TestConcurrentRuns(t *testing.T) {
	e := newEnv(t, plainManifest)
	e.MustRun("run", "--", "true")
	const n = 20
	procs := make([]*proc, n)
	start := time.Now()
	for i := range procs {
		procs[i] = e.Start("run", "--", "sh", "-c", fmt.Sprintf("exit %d", i+1))
	}
	var right int
	var took []time.Duration
	for i, p := range procs {
		r, ok := p.Wait(3 * time.Minute)
		took = append(took, r.Took)
		if ok && r.Code == i+1 {
			right++
		} else {
			t.Errorf("run %d: want exit %d, got %s", i+1, i+1, r)
		}
	}
	wall := time.Since(start)
	left, gone := e.leftoversAfter(leftoverGrace)
	if len(left) > 0 {
		t.Errorf("%d object(s) left after %v: %v", len(left), gone, left)
	}
	var failed int
	for _, p := range e.PS() {
		if p.State == "failed" {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d failed record(s) in ps -a", failed)
	}
	slices.Sort(took)
	record(t, "20 concurrent runs", "20 `airlock run -- sh -c 'exit N'` (N = 1…20) started at once against one control daemon.",
		[]benchdoc.Row{
			{Measure: "runs returning their own code", Result: fmt.Sprintf("%d/%d", right, n), Target: "20/20"},
			{Measure: "Engine objects left 10 s after the last exit", Result: fmt.Sprint(len(left)), Target: "0"},
			{Measure: "`failed` records", Result: fmt.Sprint(failed), Target: "0"},
			{Measure: "wall time of the 20; median and slowest run", Result: fmt.Sprintf("%s; %s, %s", ms(wall), ms(took[n/2]), ms(took[n-1]))},
		}, "")
}

// assertNoFailedRecords fails for every failed record ps -a lists (through a
// daemon started again if the last kill left none) and returns how many and
// the states it saw.
func (e *env) assertNoFailedRecords(t *testing.T) (int, *tally) {
	t.Helper()
	if _, ok := e.DaemonPID(); !ok {
		e.MustRun("daemon", "start")
	}
	states := &tally{}
	var failed int
	for _, p := range e.PS() {
		states.add(p.State)
		if p.State == "failed" {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d failed record(s) in ps -a: %s", failed, states)
	}
	return failed, states
}
