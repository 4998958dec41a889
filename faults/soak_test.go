//go:build faults

package faults

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/volume"

	"github.com/airlock-dev/airlock/bench/benchdoc"
)

// soakRuns is how many sequential runs TestSequentialRuns makes
// (AIRLOCK_FAULTS_RUNS, default 1000).
func soakRuns(t *testing.T) int {
	s := os.Getenv("AIRLOCK_FAULTS_RUNS")
	if s == "" {
		return 1000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("AIRLOCK_FAULTS_RUNS=%q: want a positive number", s)
	}
	return n
}

// TestSequentialRuns: N sequential `run -- true`; Engine objects, the daemon's
// fds back to their starting count, its RSS growth under 10 MB.
func TestSequentialRuns(t *testing.T) {
	n := soakRuns(t)
	e := newEnv(t, plainManifest)
	for range 5 { // warm-up: daemon, supervisor volume, the Engine's caches
		e.MustRun("run", "--", "true")
	}
	if left, _ := e.leftoversAfter(leftoverGrace); len(left) > 0 {
		t.Fatalf("warm-up left %v", left)
	}
	time.Sleep(2 * time.Second)
	pid, ok := e.DaemonPID()
	if !ok {
		t.Fatal("no control daemon after the warm-up")
	}
	before, err := readProcStats(pid)
	if err != nil {
		t.Fatal(err)
	}
	c0, n0, v0 := engineCounts(t, e.Cli)
	vols0 := volumeNames(t, e)
	var failures int
	var peak procStats
	start := time.Now()
	for i := range n {
		r := e.Run("run", "--", "true")
		if r.Code != 0 {
			failures++
			t.Errorf("run %d: %s", i+1, r)
			if failures >= 5 {
				t.Fatalf("stopping after %d failed runs", failures)
			}
		}
		if s, err := readProcStats(pid); err == nil {
			peak.fds, peak.threads, peak.rssKB = max(peak.fds, s.fds), max(peak.threads, s.threads), max(peak.rssKB, s.rssKB)
		} else {
			t.Fatalf("run %d: the daemon %d is gone: %v", i+1, pid, err)
		}
		if (i+1)%max(n/10, 1) == 0 {
			s, _ := readProcStats(pid)
			t.Logf("after %d runs (%v): fds %d, threads %d, VmRSS %d kB", i+1, time.Since(start).Round(time.Second), s.fds, s.threads, s.rssKB)
		}
	}
	elapsed := time.Since(start)
	left, _ := e.leftoversAfter(leftoverGrace)
	if len(left) > 0 {
		t.Errorf("%d object(s) of the project left: %v", len(left), left)
	}
	// The daemon finishes the last removal after the CLI returned; give it time.
	var after procStats
	deadline := time.Now().Add(15 * time.Second)
	for {
		after, err = readProcStats(pid)
		if err != nil {
			t.Fatalf("the daemon %d is gone: %v", pid, err)
		}
		if after.fds <= before.fds || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	c1, n1, v1 := engineCounts(t, e.Cli)
	if after.fds > before.fds+2 {
		t.Errorf("daemon fds: %d before, %d after %d runs", before.fds, after.fds, n)
	}
	growthKB := after.rssKB - before.rssKB
	if growthKB >= 10*1024 {
		t.Errorf("daemon RSS grew by %d kB over %d runs (want < 10 MB)", growthKB, n)
	}
	// This scenario's supervisor volume exists since the warm-up: a supervisor
	// volume made since belongs to another build (another test process on this
	// Engine), so it does not count against the runs.
	others := otherSupervisorVolumes(t, e, vols0)
	if c1 != c0 || n1 != n0 || v1-len(others) != v0 {
		t.Errorf("Engine-wide counts changed: containers %d -> %d, networks %d -> %d, volumes %d -> %d (%d of them supervisor volumes of other builds: %v)", c0, c1, n0, n1, v0, v1, len(others), others)
	}
	record(t, fmt.Sprintf("%d sequential runs", n), fmt.Sprintf("%d × `airlock run -- true` one after the other against one control daemon (after 5 warm-up runs); the daemon's figures from /proc/PID (the daemon exposes no goroutine count: threads stand in, and Go keeps idle threads, so they are not expected to fall back).", n),
		[]benchdoc.Row{
			{Measure: "failed runs", Result: fmt.Sprint(failures), Target: "0"},
			{Measure: "time; per run", Result: fmt.Sprintf("%v; %s", elapsed.Round(time.Second), ms(elapsed/time.Duration(n)))},
			{Measure: "Engine containers / networks / volumes, before → after", Result: fmt.Sprintf("%d → %d / %d → %d / %d → %d (new supervisor volumes of other builds, not counted: %d)", c0, c1, n0, n1, v0, v1, len(others)), Target: "unchanged"},
			{Measure: "project's Engine objects left", Result: fmt.Sprint(len(left)), Target: "0"},
			{Measure: "daemon fds before → peak → after", Result: fmt.Sprintf("%d → %d → %d", before.fds, peak.fds, after.fds), Target: "after ≤ before + 2"},
			{Measure: "daemon threads before → peak → after", Result: fmt.Sprintf("%d → %d → %d", before.threads, peak.threads, after.threads)},
			{Measure: "daemon VmRSS before → peak → after", Result: fmt.Sprintf("%.1f → %.1f → %.1f MB", float64(before.rssKB)/1024, float64(peak.rssKB)/1024, float64(after.rssKB)/1024)},
			{Measure: "daemon RSS growth", Result: fmt.Sprintf("%+.1f MB", float64(growthKB)/1024), Target: "< 10 MB"},
		}, "")
}

func volumeNames(t *testing.T, e *env) map[string]bool {
	t.Helper()
	vs, err := e.Cli.VolumeList(context.Background(), volume.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, v := range vs.Volumes {
		out[v.Name] = true
	}
	return out
}

// otherSupervisorVolumes lists the volumes made since before that are
// supervisor volumes (label dev.airlock.supervisor).
func otherSupervisorVolumes(t *testing.T, e *env, before map[string]bool) []string {
	t.Helper()
	vs, err := e.Cli.VolumeList(context.Background(), volume.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range vs.Volumes {
		if _, ok := v.Labels["dev.airlock.supervisor"]; ok && !before[v.Name] {
			out = append(out, v.Name)
		}
	}
	return out
}
