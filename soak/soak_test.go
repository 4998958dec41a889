//go:build soak

// Package soak is `make soak` (issue 24): every preset with a server and every
// example, on stock Debian images, 30 runs in a row whose main command uses the
// server at once, plus 20 concurrent runs; 0 failures expected; p50/p95 times
// recorded in docs/reliability.md.
//
// It is behind the build tag soak, so `make test` does not run it; like every
// integration test of the repository it fails, not skips, without an Engine.
// AIRLOCK_SOAK_RUNS=N (default 30) sets the length of each series;
// AIRLOCK_SOAK_RECORD=0 leaves docs/reliability.md alone.
package soak

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

func TestMain(m *testing.M) { os.Exit(clitest.Main(m, "soak", "AIRLOCK_SOAK_BINARY")) }

// The Debian images (scripts/debian-image.sh builds each once, by tag).
const (
	redisImage    = "airlock-bench/debian-redis:bookworm-1" // redis-server redis-tools make
	postgresImage = "airlock-test/debian-postgres:bookworm-1"
	mariadbImage  = "airlock-test/debian-mariadb:bookworm-1" // mariadb-server mariadb-client
	demoImage     = "airlock-demo/busybox:latest"            // the examples' image: the busybox test image
)

// A scenario: a project (a manifest, or an example's folder) and a main command
// that uses what the sandbox runs at once, with what its stdout must hold.
type scenario struct {
	name     string
	example  string // examples/<example>, copied as the project; "" for manifest
	manifest string // {{image}}: the busybox test image
	cmd      []string
	want     string
}

func scenarios() []scenario {
	return []scenario{
		{name: "preset redis", manifest: "presets = [\"redis\"]\n[sandbox]\nimage = \"" + redisImage + "\"\nnetwork = \"none\"\n",
			cmd: []string{"sh", "-c", `redis-cli -u "$REDIS_URL" set k v >/dev/null && redis-cli -u "$REDIS_URL" get k`}, want: "v\n"},
		{name: "preset postgres", manifest: "presets = [\"postgres\"]\n[sandbox]\nimage = \"" + postgresImage + "\"\nnetwork = \"none\"\n",
			cmd: []string{"psql", "-tAc", "select 40 + 2"}, want: "42\n"},
		{name: "preset mariadb", manifest: "presets = [\"mariadb\"]\n[sandbox]\nimage = \"" + mariadbImage + "\"\nnetwork = \"none\"\n",
			cmd: []string{"mariadb", "-N", "-u", "root", "-e", "select 40 + 2"}, want: "42\n"},
		{name: "example hello", example: "hello", cmd: []string{"wget", "-qO-", "http://127.0.0.1:8080/"}, want: "hello"},
		{name: "example services", example: "services", cmd: []string{"wget", "-qO-", "http://web:8080/"}, want: "hello from the web service"},
		{name: "example redis-ci", example: "redis-ci", cmd: []string{"make", "test"}, want: "redis-ci: ok"},
	}
}

func runs() int {
	if n, err := strconv.Atoi(os.Getenv("AIRLOCK_SOAK_RUNS")); err == nil && n > 0 {
		return n
	}
	return 30
}

// concurrent is how many runs the concurrent series starts at once.
const concurrent = 20

func TestSoak(t *testing.T) {
	images(t)
	var rows []benchdoc.Row
	n := runs()
	for _, s := range scenarios() {
		e := project(t, s)
		var times []time.Duration
		failures := 0
		for i := 0; i < n; i++ {
			r := e.Run(append([]string{"run", "--"}, s.cmd...)...)
			if r.Code != 0 || !strings.Contains(r.Stdout, s.want) {
				failures++
				t.Errorf("%s, run %d of %d: %s", s.name, i+1, n, r)
				continue
			}
			times = append(times, r.Took)
		}
		rows = append(rows, row(fmt.Sprintf("%s: %d runs in a row", s.name, n), times, failures))
	}
	// Concurrent runs of one project: the redis preset.
	s := scenarios()[0]
	e := project(t, s)
	var mu sync.Mutex
	var times []time.Duration
	failures := 0
	var wg sync.WaitGroup
	for i := 0; i < concurrent; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.Run(append([]string{"run", "--"}, s.cmd...)...)
			mu.Lock()
			defer mu.Unlock()
			if r.Code != 0 || !strings.Contains(r.Stdout, s.want) {
				failures++
				t.Errorf("%s, concurrent run: %s", s.name, r)
				return
			}
			times = append(times, r.Took)
		}()
	}
	wg.Wait()
	rows = append(rows, row(fmt.Sprintf("%s: %d runs at once", s.name, concurrent), times, failures))
	testenv.AssertNoLeftovers(t, e.Cli, "dev.airlock.project", e.Project)
	record(t, rows)
}

// project makes a scenario's project: an example's folder or a manifest.
func project(t *testing.T, s scenario) *clitest.Env {
	t.Helper()
	e := clitest.New(t, s.manifest)
	if s.example != "" {
		if err := os.Remove(filepath.Join(e.Project, "sandbox.toml")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if err := os.CopyFS(e.Project, os.DirFS(filepath.Join("..", "examples", s.example))); err != nil {
			t.Fatalf("cannot copy example %s: %v", s.example, err)
		}
	}
	return e
}

// images builds the Debian images once and tags the examples' images.
func images(t *testing.T) {
	t.Helper()
	for _, img := range []struct {
		tag      string
		packages []string
	}{{redisImage, []string{"redis-server", "redis-tools", "make"}}, {postgresImage, []string{"postgresql"}}, {mariadbImage, []string{"mariadb-server", "mariadb-client"}}} {
		if out, err := exec.Command("../scripts/debian-image.sh", append([]string{img.tag}, img.packages...)...).CombinedOutput(); err != nil {
			t.Fatalf("cannot build %s: %v\n%s", img.tag, err, out)
		}
	}
	cli := testenv.Client(t)
	ctx := context.Background()
	if err := cli.ImageTag(ctx, testenv.BusyboxImage(t), demoImage); err != nil {
		t.Fatalf("cannot tag %s: %v", demoImage, err)
	}
	// examples/redis-ci names airlock-demo/redis-ci:latest: the Debian redis image.
	if err := cli.ImageTag(ctx, redisImage, "airlock-demo/redis-ci:latest"); err != nil {
		t.Fatalf("cannot tag airlock-demo/redis-ci:latest: %v", err)
	}
}

// row is a series' line: p50 and p95 of its runs, and its failures.
func row(measure string, times []time.Duration, failures int) benchdoc.Row {
	slices.Sort(times)
	p := func(q float64) string {
		if len(times) == 0 {
			return "–"
		}
		return benchdoc.MS(times[min(len(times)-1, int(q*float64(len(times))))])
	}
	return benchdoc.Row{Measure: measure, Result: fmt.Sprintf("%d failures; p50 %s, p95 %s", failures, p(0.5), p(0.95)), Target: "0 failures"}
}

func record(t *testing.T, rows []benchdoc.Row) {
	t.Helper()
	for _, r := range rows {
		t.Logf("FIGURE %s | %s", r.Measure, r.Result)
	}
	if os.Getenv("AIRLOCK_SOAK_RECORD") == "0" {
		return
	}
	verdict := "PASS"
	if t.Failed() {
		verdict = "FAIL"
	}
	intro := fmt.Sprintf("`make soak` (`%s`): **%s**. Each series runs `airlock run -- CMD` in one project, CMD using the sandbox's server or "+
		"sidecar at once (redis-cli, psql, wget, make test); stock Debian bookworm images built by scripts/debian-image.sh "+
		"(%s, %s, %s); the examples on the busybox image, redis-ci on the Debian redis one. Machine: %s.", t.Name(), verdict, redisImage, postgresImage, mariadbImage, benchdoc.Machine())
	notes := "Times are each run's wall time as the CLI saw it (process start to exit). The tool presets (go, node, python) and the\n" +
		"docker preset are not in it: the first run the host's toolchains, the last needs a privileged container, which this\n" +
		"machine cannot start."
	if err := benchdoc.Write("../docs/reliability.md", "Soak: presets and examples (issue 24)", intro, rows, notes); err != nil {
		t.Errorf("cannot record the figures: %v", err)
	}
}
