//go:build faults

package faults

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

// loadedKillRuns is how many runs TestKillDaemonLoaded makes
// (AIRLOCK_FAULTS_KILL_RUNS overrides it).
const loadedKillRuns = 50

// loadedKillAtOnce is how many of them run at once.
const loadedKillAtOnce = 3

// TestKillDaemonLoaded: with two CPUs kept busy, runs of `sh -c 'sleep 2;
// exit 3'` (with a line on stdout before and after the sleep and one on
// stderr), 3 at a time, each with a kill -9 of the control daemon at a random
// moment of its own; every CLI restarts the daemon, resumes its run and returns
// 3 with its whole output, once; nothing is failed or left.
func TestKillDaemonLoaded(t *testing.T) {
	runs := loadedKillRuns
	if v := os.Getenv("AIRLOCK_FAULTS_KILL_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("AIRLOCK_FAULTS_KILL_RUNS=%q: want a positive number", v)
		}
		runs = n
	}
	e := newEnv(t, plainManifest)
	clitest.LoadCPUs(t, 2)
	const script = "echo before; echo oops >&2; sleep 2; echo after; exit 3"
	const wantOut, wantErr = "before\nafter\n", "oops\n"
	span := e.baseline(script, 3)

	var (
		mu        sync.Mutex
		right     int
		noKill    int
		codes     = &tally{}
		wrong     = &tally{}
		slowest   time.Duration
		failures  []string
		next      = make(chan int)
		wg        sync.WaitGroup
		startedAt = time.Now()
	)
	for range loadedKillAtOnce {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				at := rand.N(span)
				p := e.Start("run", "--", "sh", "-c", script)
				// The kill, at its moment from this CLI's start (unless the
				// CLI ended first).
				select {
				case <-p.Done:
				case <-time.After(at - time.Since(p.Started)):
				}
				killed := e.KillDaemons()
				r, ok := p.Wait(2 * time.Minute)
				mu.Lock()
				codes.add(fmt.Sprint(r.Code))
				slowest = max(slowest, r.Took)
				if len(killed) == 0 {
					noKill++
				}
				switch {
				case !ok:
					wrong.add("did not end within 2 min")
					failures = append(failures, fmt.Sprintf("run %d, kill at %v: did not end within 2 min\n%s", i+1, at, r))
				case r.Code == 3 && r.Stdout == wantOut && r.Stderr == wantErr:
					right++
				default:
					msg := firstLine(r.Stderr)
					if r.Code == 3 {
						msg = fmt.Sprintf("exit 3, output %q, %q", r.Stdout, r.Stderr)
					}
					wrong.add(fmt.Sprintf("exit %d: %s", r.Code, mdEscape(redactIDs(msg))))
					failures = append(failures, fmt.Sprintf("run %d, kill at %v (%d daemon(s) killed): want exit 3 with %q and %q, got %s", i+1, at, len(killed), wantOut, wantErr, r))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range runs {
		next <- i
	}
	close(next)
	wg.Wait()
	wall := time.Since(startedAt)
	for _, f := range failures {
		t.Error(f)
	}

	left, took := e.leftoversAfter(leftoverGrace)
	if len(left) > 0 {
		t.Errorf("%d object(s) left %v after the runs: %v", len(left), took, left)
		testenv.ForceRemove(e.Cli, labelProject, e.Project)
	}
	failed, states := e.assertNoFailedRecords(t)
	record(t, "kill -9 of the control daemon during run, machine loaded",
		fmt.Sprintf("Two busy CPU loops (`sh -c 'while :; do :; done'`) for the whole test; %d × `airlock run -- sh -c '%s'`, %d at a time against one control daemon; for each run, every daemon process of the user killed with SIGKILL at a random moment in [0, %v) from its CLI's start (90 %% of an undisturbed run under that load, the fastest of 3): so a run may see its neighbours' kills too, in any phase (setup, start, output, exit).", runs, script, loadedKillAtOnce, span.Round(time.Millisecond)),
		[]benchdoc.Row{
			{Measure: "runs returning 3 with their whole output once", Result: fmt.Sprintf("%d/%d", right, runs), Target: fmt.Sprintf("%d/%d", runs, runs)},
			{Measure: "exit codes", Result: codes.String()},
			{Measure: "runs not right", Result: wrong.String(), Target: "none"},
			{Measure: "kills that found no daemon (it was down already, or the run had ended)", Result: fmt.Sprint(noKill)},
			{Measure: "slowest run; wall time", Result: fmt.Sprintf("%s; %s", ms(slowest), ms(wall))},
			{Measure: "`failed` records in `ps -a` afterwards", Result: fmt.Sprintf("%d (states: %s)", failed, states), Target: "0"},
			{Measure: "Engine objects left 10 s after the runs", Result: fmt.Sprint(len(left)), Target: "0"},
		}, "")
}

// redactIDs replaces sandbox IDs (UUIDs) and temporary paths in a message, so
// that equal messages count together.
func redactIDs(msg string) string {
	msg = uuidRE.ReplaceAllString(msg, "ID")
	return tmpPathRE.ReplaceAllString(msg, "/tmp/…")
}

var (
	uuidRE    = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	tmpPathRE = regexp.MustCompile(`/tmp/[^\s:"]+`)
)
