// Command benchredis measures a sidecar CI job (issue 12): `make test` pinging a
// ready-gated redis, on a Debian image with redis-server, redis-tools and make. It
// times, interleaved in one run, `airlock run -- make test` with the redis preset
// against the job's one-container floor (a single `docker run --rm` that starts
// redis-server in the background, waits for it and runs make test) and against
// docker-compose with a healthcheck-gated redis service. It prints medians and ratios
// and records them in docs/benchmarks.md under "## Redis CI job".
// scripts/bench-redis.sh builds the image and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	dockerclient "github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// The job: make test pings redis on 127.0.0.1:6379 (the same in all three setups),
// and says so, so that a run that did not reach it is noticed.
const (
	makefile = "test:\n\tredis-cli -h 127.0.0.1 -p 6379 ping | grep -q PONG\n\t@echo " + answered + "\n"
	answered = "redis answered"
)

func main() {
	o := benchdoc.Flags("scripts/bench-redis.sh")
	image := flag.String("image", "airlock-bench/debian-redis:bookworm-1", "the Debian image with redis-server, redis-cli and make (scripts/bench-redis.sh builds it)")
	compose := flag.String("compose", "docker-compose", "the docker-compose binary (\"\" to skip its rows)")
	interval := flag.Duration("interval", time.Second, "the compose redis service's healthcheck interval")
	runs := flag.Int("runs", 10, "runs of each command")
	flag.Parse()
	benchdoc.Exit("benchredis", bench(o.Airlock, *image, *compose, *interval, *runs, o.Doc, o.Command))
}

func bench(airlock, image, compose string, interval time.Duration, runs int, doc, command string) error {
	airlock, _ = filepath.Abs(airlock)
	ctx := context.Background()
	cli, err := testenv.NewClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, _, err := cli.ImageInspectWithRaw(ctx, image); err != nil {
		return fmt.Errorf("image %s: %w (scripts/bench-redis.sh builds it)", image, err)
	}
	manifest := fmt.Sprintf("presets = [\"redis\"]\n\n[sandbox]\nimage = %q\n", image)
	p, err := benchdoc.NewProject("airlock-bench-redis-", map[string]string{"sandbox.toml": manifest, "Makefile": makefile})
	if err != nil {
		return err
	}
	defer p.Close(airlock)
	r := &redisBench{ctx: ctx, cli: cli, airlock: airlock, image: image, compose: compose, interval: interval, runs: runs, p: p, withCompose: compose != ""}
	if err := r.addWarmProject(manifest); err != nil {
		return err
	}
	if err := r.writeCompose(); err != nil {
		return err
	}
	if !r.withCompose {
		r.composeNote = "docker-compose is not installed here: its rows are skipped."
	} else {
		defer func() { _, _ = r.downCompose() }()
		r.tryCompose()
	}
	if err := r.warmUp(); err != nil {
		return err
	}
	if err := r.sample(); err != nil {
		return err
	}
	r.printSamples()
	rows := r.rows()
	benchdoc.Print(50, rows)
	if r.composeNote != "" {
		fmt.Println(r.composeNote)
	}
	if doc == "" {
		return nil
	}
	intro := fmt.Sprintf("By `%s` against the Docker Engine on this machine, %s; image: `%s` (Debian bookworm minbase with redis-server %s, redis-tools and make, built by debootstrap + `docker import`); runs interleaved.",
		command, benchdoc.Machine(), image, redisVersion(image))
	return benchdoc.Write(doc, "Redis CI job", intro, rows, r.notes())
}

// The floor: one container, redis started in the background with the preset's
// arguments, its answer awaited, then the job, in the project at the same path.
const floorScript = `redis-server --save "" --appendonly no --bind 127.0.0.1 --port 6379 --daemonize yes >/dev/null && ` +
	`until redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; do sleep 0.01; done && make test`

// composeYAML is docker-compose's file, of the image, the healthcheck interval,
// the image again, the project's bind mount and the project: a redis service
// gated by a healthcheck, and the job, which shares redis's network namespace
// so that the same Makefile (127.0.0.1:6379) works.
const composeYAML = `version: "2.4"
services:
  redis:
    image: %q
    command: ["redis-server", "--save", "", "--appendonly", "no", "--port", "6379"]
    healthcheck:
      test: ["CMD", "redis-cli", "-h", "127.0.0.1", "-p", "6379", "ping"]
      interval: %s
      timeout: 5s
      retries: 30
  job:
    image: %q
    network_mode: "service:redis"
    depends_on:
      redis:
        condition: service_healthy
    volumes: [%q]
    working_dir: %q
    command: ["make", "test"]
`

// redisBench is one run of the benchmark: the project, the three setups that
// run its job, and the samples taken so far.
type redisBench struct {
	ctx      context.Context
	cli      *dockerclient.Client
	airlock  string
	image    string
	compose  string
	interval time.Duration
	runs     int
	p        *benchdoc.Project

	// The second project, whose pool keeps one sandbox parked, and a client
	// of the daemon that keeps it.
	warmProject  string
	daemonClient *client.Client

	composeName, composeFile string
	// Whether the docker-compose rows are taken, what the record says when
	// they are not, and docker-compose's version.
	withCompose                 bool
	composeNote, composeVersion string

	airlockRun, floorRun, sharedFloorRun, composeUp, composeDown, warmRun benchdoc.Timings
}

// timed runs name args in the project dir; with check, the job must have
// reached redis.
func (r *redisBench) timed(check bool, name string, args ...string) (time.Duration, error) {
	d, out, err := r.p.Timed(name, args...)
	if err == nil && check && !strings.Contains(out, answered) {
		return 0, fmt.Errorf("%s %s: make test did not run (no %q in its output)\n%s", name, strings.Join(args, " "), answered, out)
	}
	return d, err
}

func (r *redisBench) runAirlock() (time.Duration, error) {
	return r.timed(true, r.airlock, "run", "--", "make", "test")
}

// addWarmProject makes the project of the same job from a warm pool
// (docs/pool.md): the same manifest and [sandbox.pool] size = 1, its redis
// parked and ready.
func (r *redisBench) addWarmProject(manifest string) error {
	var err error
	r.warmProject, err = r.p.AddDir("warm-project", map[string]string{"sandbox.toml": manifest + "\n[sandbox.pool]\nsize = 1\n", "Makefile": makefile})
	if err != nil {
		return err
	}
	r.daemonClient = r.p.Client()
	return nil
}

func (r *redisBench) runWarm() (time.Duration, error) {
	c := r.p.Command(r.airlock, "run", "--", "make", "test")
	c.Dir = r.warmProject
	d, out, err := benchdoc.Timed(c)
	if err == nil && !strings.Contains(out, answered) {
		return 0, fmt.Errorf("warm run: make test did not run (no %q in its output)\n%s", answered, out)
	}
	return d, err
}

func (r *redisBench) settleWarm() error {
	return benchdoc.PoolSettled(r.ctx, r.cli, r.daemonClient, r.warmProject, 1)
}

// runFloor runs the floor (floorScript), on network if given.
func (r *redisBench) runFloor(network ...string) (time.Duration, error) {
	project := r.p.Dir
	args := append([]string{"run", "--rm"}, network...)
	args = append(args, "-v", project+":"+project, "-w", project, r.image, "sh", "-c", floorScript)
	return r.timed(true, "docker", args...)
}

// writeCompose writes docker-compose's file (composeYAML) in the home.
func (r *redisBench) writeCompose() error {
	project := r.p.Dir
	r.composeName = fmt.Sprintf("airlockbenchredis%d", os.Getpid())
	r.composeFile = filepath.Join(r.p.Home, "compose.yml")
	yaml := fmt.Sprintf(composeYAML, r.image, composeDuration(r.interval), r.image, project+":"+project, project)
	return os.WriteFile(r.composeFile, []byte(yaml), 0o644)
}

func (r *redisBench) composeArgs(args ...string) []string {
	return append([]string{"-p", r.composeName, "-f", r.composeFile, "--ansi", "never"}, args...)
}

func (r *redisBench) runCompose() (time.Duration, error) {
	return r.timed(true, r.compose, r.composeArgs("up", "--abort-on-container-exit", "--exit-code-from", "job")...)
}

func (r *redisBench) downCompose() (time.Duration, error) {
	return r.timed(false, r.compose, r.composeArgs("down", "--remove-orphans", "--timeout", "10")...)
}

// tryCompose takes docker-compose's version and runs its job once (up and
// down); when that fails, its rows are skipped.
func (r *redisBench) tryCompose() {
	out, err := exec.Command(r.compose, "version", "--short").Output()
	r.composeVersion = strings.TrimSpace(string(out))
	if err == nil {
		_, err = r.runCompose()
	}
	if err == nil {
		_, err = r.downCompose()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchredis: docker-compose does not run here, its rows are skipped:", err)
		r.composeNote = "docker-compose did not run here: its rows are skipped."
		r.withCompose = false
	}
}

// settle lets the last airlock run's removal finish (untimed) before the next
// command: airlock run returns once the daemon took the removal over, and no
// run should pay for the last one's.
func (r *redisBench) settle() error { return benchdoc.Settled(r.ctx, r.cli, r.p.Dir) }

// warmUp runs airlock (the supervisor volume is filled once per binary; the
// daemon starts) and the floor once, and fills the warm project's pool.
func (r *redisBench) warmUp() error {
	if _, err := r.runAirlock(); err != nil {
		return err
	}
	if err := r.settle(); err != nil {
		return err
	}
	if _, err := r.runFloor(); err != nil {
		return err
	}

	if _, err := r.runWarm(); err != nil { // the first run fills the pool
		return err
	}
	return r.settleWarm()
}

// sample runs the job in every setup, interleaved, runs times.
func (r *redisBench) sample() error {
	for i := 0; i < r.runs; i++ {
		if err := r.warmRun.Add(r.runWarm()); err != nil {
			return err
		}
		if err := r.settleWarm(); err != nil {
			return err
		}
		if err := r.airlockRun.Add(r.runAirlock()); err != nil {
			return err
		}
		if err := r.settle(); err != nil {
			return err
		}
		if err := r.floorRun.Add(r.runFloor()); err != nil {
			return err
		}
		// The same floor on the network airlock's sandbox joins (made by the warm-up run).
		if err := r.sharedFloorRun.Add(r.runFloor("--network", docker.SharedNetwork)); err != nil {
			return err
		}
		if r.withCompose {
			if err := r.composeUp.Add(r.runCompose()); err != nil {
				return err
			}
			if err := r.composeDown.Add(r.downCompose()); err != nil {
				return err
			}
		}
	}
	return nil
}

// printSamples prints every sample, in ms.
func (r *redisBench) printSamples() {
	fmt.Printf("samples (ms): airlock %v\n              floor   %v\n", msList(r.airlockRun), msList(r.floorRun))
	if r.withCompose {
		fmt.Printf("              compose %v\n              down    %v\n", msList(r.composeUp), msList(r.composeDown))
	}
}

// rows are the figures: the samples' medians and ratios.
func (r *redisBench) rows() []benchdoc.Row {
	ar, fr := benchdoc.Median(r.airlockRun), benchdoc.Median(r.floorRun)
	rows := []benchdoc.Row{
		{Measure: "`airlock run -- make test`, `[daemons.redis]` ready-gated (redis preset; median of " + fmt.Sprint(r.runs) + ")", Result: benchdoc.MS(ar)},
		{Measure: "floor: one `docker run --rm IMAGE sh -c 'redis-server … --daemonize yes && until redis-cli ping …; make test'` (median)", Result: benchdoc.MS(fr)},
		{Measure: "ratio airlock / floor", Result: benchdoc.Ratio(ar, fr), Target: "≤ 1.15×"},
		{Measure: "the same floor with `--network " + docker.SharedNetwork + "`, the network airlock's sandbox joins (median)", Result: benchdoc.MS(benchdoc.Median(r.sharedFloorRun))},
		{Measure: "ratio airlock / floor on that network", Result: benchdoc.Ratio(ar, benchdoc.Median(r.sharedFloorRun))},
		{Measure: "warm `airlock run -- make test` from a pool of 1 (`[sandbox.pool]`: redis parked and ready; median)", Result: benchdoc.MS(benchdoc.Median(r.warmRun))},
		{Measure: "warm ratio airlock / floor", Result: benchdoc.Ratio(benchdoc.Median(r.warmRun), fr), Target: "≤ 0.3×"},
	}
	if r.withCompose {
		cu, cd := benchdoc.Median(r.composeUp), benchdoc.Median(r.composeDown)
		rows = append(rows,
			benchdoc.Row{Measure: fmt.Sprintf("docker-compose %s `up --abort-on-container-exit --exit-code-from job`, healthcheck-gated redis (interval %s; median)", r.composeVersion, composeDuration(r.interval)), Result: benchdoc.MS(cu)},
			benchdoc.Row{Measure: "ratio airlock / docker-compose", Result: benchdoc.Ratio(ar, cu), Target: "≤ 0.3×"},
			benchdoc.Row{Measure: "docker-compose `down` afterwards (untimed in the ratio; median)", Result: benchdoc.MS(cd)},
		)
	}
	return rows
}

// notes is what the section says under its table.
func (r *redisBench) notes() string {
	notes := "The job is `make test`, whose recipe is `redis-cli -h 127.0.0.1 -p 6379 ping | grep -q PONG`, the same in all\n" +
		"three setups. airlock runs it with `presets = [\"redis\"]`: redis-server (no RDB, no AOF) as a supervised daemon,\n" +
		"ready when 127.0.0.1:6379 accepts a connection, the main command started then, the daemon stopped after it;\n" +
		"each run waits (untimed) until the daemon finished removing the sandbox before the next command starts.\n" +
		"The floor is what one container can do at best: redis-server started in the background with the same\n" +
		"arguments, `redis-cli ping` polled every 10 ms, then `make test`, the project bind-mounted at the same path.\n" +
		"docker-compose starts a redis service with a healthcheck (`redis-cli ping` every " + composeDuration(r.interval) + "; Docker 20.10 runs\n" +
		"the first check one interval after the start) and the job once it is healthy, in redis's network namespace\n" +
		"(`network_mode: service:redis`, so 127.0.0.1 works unchanged); `up --abort-on-container-exit --exit-code-from job`\n" +
		"returns the job's exit code after stopping redis, like `airlock run`; `down` removes the containers and the\n" +
		"network afterwards, untimed in the ratio as airlock's own removal is. compose's time falls with a shorter\n" +
		"healthcheck interval (`-interval` of bench/redis, e.g. `scripts/bench-redis.sh -interval 100ms`)."
	if r.composeNote != "" {
		notes += "\n" + r.composeNote
	}
	return notes
}

// composeDuration formats d as compose files write durations (1s, 500ms).
func composeDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// redisVersion is the image's redis-server version, or "?".
func redisVersion(image string) string {
	out, err := exec.Command("docker", "run", "--rm", image, "redis-server", "--version").Output()
	if err != nil {
		return "?"
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return "?"
}

func msList(ds []time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Milliseconds()
	}
	return out
}
