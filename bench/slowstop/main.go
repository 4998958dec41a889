// Command benchslowstop measures CI jobs whose sidecar is slow to stop (issue 24,
// a fast end of run): a plain `redis-server` daemon (no preset, no --hz) and a
// memcached daemon, each ready-gated, with a job that uses the server once. It
// times, interleaved in one run, `airlock run` (which returns once the job
// exited, the daemon finishing its shutdown in the background), `airlock run
// --wait` (the whole shutdown in the run, as before) and the job's one-container
// floor (a single `docker run --rm` that starts the server in the background,
// waits for its answer and runs the job). It records medians and ratios in
// docs/benchmarks.md under "## Jobs with a daemon slow to stop".
// scripts/bench-slowstop.sh builds the images and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/test/testenv"
)

// A job: the daemon's manifest, the floor's background start of the same
// server, and the job, which prints answered when the server answered.
type job struct {
	name, image string
	manifest    string
	floorStart  string // starts the server in the background and waits for its answer
	cmd         string // the job: prints answered
}

const answered = "server answered"

// ask sends a request on bash's /dev/tcp and prints answered when the reply starts with want.
func ask(port int, req, want string) string {
	return fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && printf '%s' >&3 && read -r l <&3 && case "$l" in %s*) echo %q;; *) exit 1;; esac`, port, req, want, answered)
}

func jobs(redisImage, memcachedImage string) []job {
	return []job{{
		name:  "plain redis-server",
		image: redisImage,
		manifest: fmt.Sprintf(`[sandbox]
image = %q
[daemons.redis]
command = ["redis-server", "--save", "", "--appendonly", "no", "--bind", "127.0.0.1", "--port", "6379"]
ready = { tcp = "127.0.0.1:6379", send = "PING\r\n", expect = "+PONG" }
`, redisImage),
		floorStart: `redis-server --save "" --appendonly no --bind 127.0.0.1 --port 6379 --daemonize yes >/dev/null && until redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; do sleep 0.01; done`,
		cmd:        ask(6379, `PING\r\n`, "+PONG"),
	}, {
		name:  "memcached",
		image: memcachedImage,
		manifest: fmt.Sprintf(`[sandbox]
image = %q
[daemons.memcached]
command = ["memcached", "-u", "nobody", "-l", "127.0.0.1", "-p", "11211"]
ready = { tcp = "127.0.0.1:11211", send = "version\r\n", expect = "VERSION" }
`, memcachedImage),
		floorStart: `memcached -u nobody -l 127.0.0.1 -p 11211 -d && until bash -c '` + strings.ReplaceAll(ask(11211, `version\r\n`, "VERSION"), "'", `'\''`) + `' >/dev/null 2>&1; do sleep 0.01; done`,
		cmd:        ask(11211, `version\r\n`, "VERSION"),
	}}
}

func main() {
	o := benchdoc.Flags("scripts/bench-slowstop.sh")
	redisImage := flag.String("redis-image", "airlock-bench/debian-redis:bookworm-1", "a Debian image with redis-server and redis-tools")
	memcachedImage := flag.String("memcached-image", "airlock-bench/debian-memcached:bookworm-1", "a Debian image with memcached")
	runs := flag.Int("runs", 10, "runs of each command")
	flag.Parse()
	benchdoc.Exit("benchslowstop", bench(o.Airlock, jobs(*redisImage, *memcachedImage), *runs, o.Doc, o.Command))
}

func bench(airlock string, js []job, runs int, doc, command string) error {
	airlock, _ = filepath.Abs(airlock)
	ctx := context.Background()
	cli, err := testenv.NewClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	var rows []benchdoc.Row
	var images []string
	for _, j := range js {
		if _, err := cli.ImageInspect(ctx, j.image); err != nil {
			return fmt.Errorf("image %s: %w (scripts/bench-slowstop.sh builds it)", j.image, err)
		}
		images = append(images, "`"+j.image+"`")
		p, err := benchdoc.NewProject("airlock-bench-slowstop-", map[string]string{"sandbox.toml": j.manifest})
		if err != nil {
			return err
		}
		timed := func(name string, args ...string) (time.Duration, error) {
			d, out, err := p.Timed(name, args...)
			if err == nil && !strings.Contains(out, answered) {
				return 0, fmt.Errorf("%s: %s %s: the job did not run (no %q in its output)\n%s", j.name, name, strings.Join(args, " "), answered, out)
			}
			return d, err
		}
		settle := func() error { return benchdoc.Settled(ctx, cli, p.Dir) }
		run := func(args ...string) (time.Duration, error) {
			d, err := timed(airlock, append(append([]string{"run"}, args...), "--", "bash", "-c", j.cmd)...)
			if err == nil {
				err = settle()
			}
			return d, err
		}
		floor := func(network ...string) (time.Duration, error) {
			args := append(append([]string{"run", "--rm"}, network...), j.image, "bash", "-c", j.floorStart+" && "+j.cmd)
			return timed("docker", args...)
		}
		// Warm up: the supervisor volume, the daemon, the image's layers.
		if _, err := run(); err != nil {
			p.Close(airlock)
			return err
		}
		if _, err := floor(); err != nil {
			p.Close(airlock)
			return err
		}
		var fast, wait, fl, shared benchdoc.Timings
		for i := 0; i < runs; i++ {
			if err := fast.Add(run()); err != nil {
				p.Close(airlock)
				return err
			}
			if err := wait.Add(run("--wait")); err != nil {
				p.Close(airlock)
				return err
			}
			if err := fl.Add(floor()); err != nil {
				p.Close(airlock)
				return err
			}
			// The same floor on the network airlock's sandbox joins.
			if err := shared.Add(floor("--network", docker.SharedNetwork)); err != nil {
				p.Close(airlock)
				return err
			}
		}
		p.Close(airlock)
		f, w, b := benchdoc.Median(fast), benchdoc.Median(wait), benchdoc.Median(fl)
		rows = append(rows,
			benchdoc.Row{Measure: fmt.Sprintf("%s job: `airlock run` (median of %d)", j.name, runs), Result: benchdoc.MS(f)},
			benchdoc.Row{Measure: fmt.Sprintf("%s job: `airlock run --wait`, the whole shutdown in the run (as before; median)", j.name), Result: benchdoc.MS(w)},
			benchdoc.Row{Measure: fmt.Sprintf("%s job: floor, one `docker run --rm` starting the server in the background (median)", j.name), Result: benchdoc.MS(b)},
			benchdoc.Row{Measure: fmt.Sprintf("%s job: ratio airlock / floor", j.name), Result: benchdoc.Ratio(f, b), Target: "≤ 1.10×"},
			benchdoc.Row{Measure: fmt.Sprintf("%s job: ratio airlock --wait / floor", j.name), Result: benchdoc.Ratio(w, b)},
			benchdoc.Row{Measure: fmt.Sprintf("%s job: the floor with `--network %s`, the network airlock's sandbox joins (median)", j.name, docker.SharedNetwork), Result: benchdoc.MS(benchdoc.Median(shared))},
			benchdoc.Row{Measure: fmt.Sprintf("%s job: ratio airlock / floor on that network", j.name), Result: benchdoc.Ratio(f, benchdoc.Median(shared))},
		)
	}
	benchdoc.Print(90, rows)
	intro := fmt.Sprintf("By `%s` against the Docker Engine on this machine, %s; images: %s (Debian bookworm minbase with the server, built by debootstrap + `docker import`); runs interleaved.",
		command, benchdoc.Machine(), strings.Join(images, ", "))
	notes := "Each job is one request to the server from bash (`/dev/tcp`), after the daemon's ready check (a tcp check that sends\n" +
		"a request and expects its answer). The plain redis-server runs without the preset's `--hz 100` (it acts on SIGTERM\n" +
		"up to 100 ms late); memcached takes about a second to exit on SIGTERM. `airlock run` returns once the job exited and\n" +
		"its output is out, with the shutdown lines of the daemons that stopped within 20 ms; a daemon still stopping then\n" +
		"finishes in the background (when all stopped within the 20 ms, the end is\n" +
		"sealed: the supervisor ends what else runs and the run returns without waiting for the container's exit), and the sandbox is removed after it (each airlock run waits, untimed, for that removal before the next\n" +
		"command). `--wait` keeps the whole shutdown in the run. The floor starts the server with `--daemonize`/`-d`, polls it\n" +
		"every 10 ms, runs the job and ends: its container is torn down with the server in it, which never shuts down.\n" +
		"The floor runs on the Engine's default bridge; airlock's sandbox joins `" + docker.SharedNetwork + "`, a user-defined network\n" +
		"(inter-container communication off), on which the Engine sets up its embedded DNS at each start: the rows with\n" +
		"`--network` measure the floor there: that setup is a cost airlock pays on every start and the floor does not."
	return benchdoc.Write(doc, "Jobs with a daemon slow to stop", intro, rows, notes)
}
