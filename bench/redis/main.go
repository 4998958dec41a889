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

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/bench/benchdoc"
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
	home, project := p.Home, p.Dir
	timed := func(check bool, name string, args ...string) (time.Duration, error) {
		d, out, err := p.Timed(name, args...)
		if err == nil && check && !strings.Contains(out, answered) {
			return 0, fmt.Errorf("%s %s: make test did not run (no %q in its output)\n%s", name, strings.Join(args, " "), answered, out)
		}
		return d, err
	}

	runAirlock := func() (time.Duration, error) { return timed(true, airlock, "run", "--", "make", "test") }
	// The same job from a warm pool (docs/pool.md): a second project with the
	// same manifest and [sandbox.pool] size = 1, its redis parked and ready.
	warmProject, err := p.AddDir("warm-project", map[string]string{"sandbox.toml": manifest + "\n[sandbox.pool]\nsize = 1\n", "Makefile": makefile})
	if err != nil {
		return err
	}
	runWarm := func() (time.Duration, error) {
		c := p.Command(airlock, "run", "--", "make", "test")
		c.Dir = warmProject
		d, out, err := benchdoc.Timed(c)
		if err == nil && !strings.Contains(out, answered) {
			return 0, fmt.Errorf("warm run: make test did not run (no %q in its output)\n%s", answered, out)
		}
		return d, err
	}
	daemonClient := p.Client()
	settleWarm := func() error { return benchdoc.PoolSettled(ctx, cli, daemonClient, warmProject, 1) }
	// The floor: one container, redis started in the background with the preset's
	// arguments, its answer awaited, then the job, in the project at the same path.
	floorScript := `redis-server --save "" --appendonly no --bind 127.0.0.1 --port 6379 --daemonize yes >/dev/null && ` +
		`until redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; do sleep 0.01; done && make test`
	runFloor := func(network ...string) (time.Duration, error) {
		args := append([]string{"run", "--rm"}, network...)
		args = append(args, "-v", project+":"+project, "-w", project, image, "sh", "-c", floorScript)
		return timed(true, "docker", args...)
	}

	// docker-compose: a redis service gated by a healthcheck, and the job, which shares
	// redis's network namespace so that the same Makefile (127.0.0.1:6379) works.
	composeName := fmt.Sprintf("airlockbenchredis%d", os.Getpid())
	composeFile := filepath.Join(home, "compose.yml")
	composeYAML := fmt.Sprintf(`version: "2.4"
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
`, image, composeDuration(interval), image, project+":"+project, project)
	if err := os.WriteFile(composeFile, []byte(composeYAML), 0o644); err != nil {
		return err
	}
	composeArgs := func(args ...string) []string {
		return append([]string{"-p", composeName, "-f", composeFile, "--ansi", "never"}, args...)
	}
	runCompose := func() (time.Duration, error) {
		return timed(true, compose, composeArgs("up", "--abort-on-container-exit", "--exit-code-from", "job")...)
	}
	downCompose := func() (time.Duration, error) {
		return timed(false, compose, composeArgs("down", "--remove-orphans", "--timeout", "10")...)
	}
	withCompose, composeNote, composeVersion := compose != "", "", ""
	if !withCompose {
		composeNote = "docker-compose is not installed here: its rows are skipped."
	} else {
		defer func() { _, _ = downCompose() }()
		out, err := exec.Command(compose, "version", "--short").Output()
		composeVersion = strings.TrimSpace(string(out))
		if err == nil {
			_, err = runCompose()
		}
		if err == nil {
			_, err = downCompose()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchredis: docker-compose does not run here, its rows are skipped:", err)
			composeNote = "docker-compose did not run here: its rows are skipped."
			withCompose = false
		}
	}

	// airlock run returns once the daemon took the removal over; let it finish
	// (untimed) before the next command, so that no run pays for the last one's.
	settle := func() error { return benchdoc.Settled(ctx, cli, project) }
	// Warm up (the supervisor volume is filled once per binary; the daemon starts).
	if _, err := runAirlock(); err != nil {
		return err
	}
	if err := settle(); err != nil {
		return err
	}
	if _, err := runFloor(); err != nil {
		return err
	}

	if _, err := runWarm(); err != nil { // the first run fills the pool
		return err
	}
	if err := settleWarm(); err != nil {
		return err
	}
	var airlockRun, floorRun, sharedFloorRun, composeUp, composeDown, warmRun benchdoc.Timings
	for i := 0; i < runs; i++ {
		if err := warmRun.Add(runWarm()); err != nil {
			return err
		}
		if err := settleWarm(); err != nil {
			return err
		}
		if err := airlockRun.Add(runAirlock()); err != nil {
			return err
		}
		if err := settle(); err != nil {
			return err
		}
		if err := floorRun.Add(runFloor()); err != nil {
			return err
		}
		// The same floor on the network airlock's sandbox joins (made by the warm-up run).
		if err := sharedFloorRun.Add(runFloor("--network", docker.SharedNetwork)); err != nil {
			return err
		}
		if withCompose {
			if err := composeUp.Add(runCompose()); err != nil {
				return err
			}
			if err := composeDown.Add(downCompose()); err != nil {
				return err
			}
		}
	}
	fmt.Printf("samples (ms): airlock %v\n              floor   %v\n", msList(airlockRun), msList(floorRun))
	if withCompose {
		fmt.Printf("              compose %v\n              down    %v\n", msList(composeUp), msList(composeDown))
	}

	ar, fr := benchdoc.Median(airlockRun), benchdoc.Median(floorRun)
	rows := []benchdoc.Row{
		{Measure: "`airlock run -- make test`, `[daemons.redis]` ready-gated (redis preset; median of " + fmt.Sprint(runs) + ")", Result: benchdoc.MS(ar)},
		{Measure: "floor: one `docker run --rm IMAGE sh -c 'redis-server … --daemonize yes && until redis-cli ping …; make test'` (median)", Result: benchdoc.MS(fr)},
		{Measure: "ratio airlock / floor", Result: benchdoc.Ratio(ar, fr), Target: "≤ 1.15×"},
		{Measure: "the same floor with `--network " + docker.SharedNetwork + "`, the network airlock's sandbox joins (median)", Result: benchdoc.MS(benchdoc.Median(sharedFloorRun))},
		{Measure: "ratio airlock / floor on that network", Result: benchdoc.Ratio(ar, benchdoc.Median(sharedFloorRun))},
		{Measure: "warm `airlock run -- make test` from a pool of 1 (`[sandbox.pool]`: redis parked and ready; median)", Result: benchdoc.MS(benchdoc.Median(warmRun))},
		{Measure: "warm ratio airlock / floor", Result: benchdoc.Ratio(benchdoc.Median(warmRun), fr), Target: "≤ 0.3×"},
	}
	if withCompose {
		cu, cd := benchdoc.Median(composeUp), benchdoc.Median(composeDown)
		rows = append(rows,
			benchdoc.Row{Measure: fmt.Sprintf("docker-compose %s `up --abort-on-container-exit --exit-code-from job`, healthcheck-gated redis (interval %s; median)", composeVersion, composeDuration(interval)), Result: benchdoc.MS(cu)},
			benchdoc.Row{Measure: "ratio airlock / docker-compose", Result: benchdoc.Ratio(ar, cu), Target: "≤ 0.3×"},
			benchdoc.Row{Measure: "docker-compose `down` afterwards (untimed in the ratio; median)", Result: benchdoc.MS(cd)},
		)
	}
	benchdoc.Print(50, rows)
	if composeNote != "" {
		fmt.Println(composeNote)
	}
	if doc == "" {
		return nil
	}
	intro := fmt.Sprintf("By `%s` against the Docker Engine on this machine, %s; image: `%s` (Debian bookworm minbase with redis-server %s, redis-tools and make, built by debootstrap + `docker import`); runs interleaved.",
		command, benchdoc.Machine(), image, redisVersion(image))
	notes := "The job is `make test`, whose recipe is `redis-cli -h 127.0.0.1 -p 6379 ping | grep -q PONG`, the same in all\n" +
		"three setups. airlock runs it with `presets = [\"redis\"]`: redis-server (no RDB, no AOF) as a supervised daemon,\n" +
		"ready when 127.0.0.1:6379 accepts a connection, the main command started then, the daemon stopped after it;\n" +
		"each run waits (untimed) until the daemon finished removing the sandbox before the next command starts.\n" +
		"The floor is what one container can do at best: redis-server started in the background with the same\n" +
		"arguments, `redis-cli ping` polled every 10 ms, then `make test`, the project bind-mounted at the same path.\n" +
		"docker-compose starts a redis service with a healthcheck (`redis-cli ping` every " + composeDuration(interval) + "; Docker 20.10 runs\n" +
		"the first check one interval after the start) and the job once it is healthy, in redis's network namespace\n" +
		"(`network_mode: service:redis`, so 127.0.0.1 works unchanged); `up --abort-on-container-exit --exit-code-from job`\n" +
		"returns the job's exit code after stopping redis, like `airlock run`; `down` removes the containers and the\n" +
		"network afterwards, untimed in the ratio as airlock's own removal is. compose's time falls with a shorter\n" +
		"healthcheck interval (`-interval` of bench/redis, e.g. `scripts/bench-redis.sh -interval 100ms`)."
	if composeNote != "" {
		notes += "\n" + composeNote
	}
	return benchdoc.Write(doc, "Redis CI job", intro, rows, notes)
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
