//go:build faults

// Package faults is airlock's fault suite (issue 11, `make faults`): it injects
// faults into real runs against the Docker Engine — kill -9 of the CLI and of the
// control daemon at spread moments, concurrent runs, a long series of runs, bad
// inputs — asserts the outcome and records the figures in docs/reliability.md.
//
// It is behind the build tag faults, so `make test` does not run it; like every
// integration test of the repository it fails, not skips, without an Engine.
// AIRLOCK_FAULTS_BINARY=path tests that binary instead of building one;
// AIRLOCK_FAULTS_RUNS=N (default 1000) sets the length of the sequential series;
// AIRLOCK_FAULTS_RECORD=0 leaves docs/reliability.md alone.
package faults

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

// labelProject is the label every object of a sandbox carries with its project dir.
const labelProject = backend.LabelProject

// leftoverGrace is how long objects of a run may take to go (the issue: 10 s).
const leftoverGrace = 10 * time.Second

// reliabilityDoc is where the figures go, relative to this package.
const reliabilityDoc = "../docs/reliability.md"

func TestMain(m *testing.M) { os.Exit(clitest.Main(m, "faults", "AIRLOCK_FAULTS_BINARY")) }

// record writes one section of docs/reliability.md (unless AIRLOCK_FAULTS_RECORD=0)
// and prints its rows.
func record(t *testing.T, title, intro string, rows []benchdoc.Row, notes string) {
	t.Helper()
	for _, r := range rows {
		t.Logf("FIGURE %s | %s | %s | target %s", title, r.Measure, r.Result, r.Target)
	}
	if os.Getenv("AIRLOCK_FAULTS_RECORD") == "0" {
		return
	}
	verdict := "PASS"
	if t.Failed() {
		verdict = "FAIL"
	}
	intro = fmt.Sprintf("`%s`: **%s**. %s Machine: %s.", t.Name(), verdict, intro, benchdoc.Machine())
	if err := benchdoc.Write(reliabilityDoc, title, intro, rows, notes); err != nil {
		t.Errorf("cannot record the figures: %v", err)
	}
}

// env is one scenario's hermetic environment (clitest.Env): its own HOME and
// XDG dirs (so its own control daemon) and a project.
type env struct{ *clitest.Env }

type (
	result = clitest.Result
	proc   = clitest.Proc
)

func newEnv(t *testing.T, manifest string) *env { return &env{clitest.New(t, manifest)} }

// leftoversAfter waits until no object of the project is left or grace passed,
// and returns what is left and how long it took to go.
func (e *env) leftoversAfter(grace time.Duration) ([]string, time.Duration) {
	e.T.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), grace+time.Minute)
	defer cancel()
	left, err := testenv.AwaitNoLeftovers(ctx, e.Cli, labelProject, e.Project, grace)
	if err != nil {
		e.T.Fatal(err)
	}
	return left, time.Since(start)
}

// containerStates lists the states of the project's containers.
func (e *env) containerStates() []string {
	var out []string
	for _, c := range e.Containers() {
		out = append(out, c.State)
	}
	return out
}

// engineCounts counts every container, network and volume on the Engine.
func engineCounts(t *testing.T, cli *client.Client) (ctrs, nets, vols int) {
	t.Helper()
	ctx := context.Background()
	c, err := cli.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	n, err := cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := cli.VolumeList(ctx, volume.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(c), len(n), len(v.Volumes)
}

// procStats is what /proc says about a process.
type procStats struct {
	fds, threads int
	rssKB        int
}

func readProcStats(pid int) (procStats, error) {
	var s procStats
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = len(fds)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.Atoi(f[0])
		switch k {
		case "Threads":
			s.threads = n
		case "VmRSS":
			s.rssKB = n
		}
	}
	return s, nil
}

// moments returns n offsets spread evenly over [0, span).
func moments(n int, span time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i) * span / time.Duration(n)
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// tally counts things by key, printed in key order of first appearance.
type tally struct {
	mu    sync.Mutex
	keys  []string
	count map[string]int
}

func (c *tally) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.count == nil {
		c.count = map[string]int{}
	}
	if _, ok := c.count[k]; !ok {
		c.keys = append(c.keys, k)
	}
	c.count[k]++
}

func (c *tally) String() string {
	var parts []string
	for _, k := range c.keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, c.count[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
