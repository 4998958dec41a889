// Command benchscale measures many sandboxes at once on one Engine (issue 25,
// docs/scaling.md): N concurrent `airlock run -- true` on the local busybox
// image against N concurrent `docker run --rm IMAGE true` started the same way
// (N processes at once), every exit code checked and nothing left, with the
// control daemon's peak memory. It records docs/benchmarks.md "## Many at
// once". scripts/bench-scale.sh runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	dockerclient "github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/bench/benchdoc"
)

func main() {
	o := benchdoc.Flags("scripts/bench-scale.sh")
	n := flag.Int("n", 100, "runs at once")
	creates := flag.Int("creates", 0, "runtime.creates_per_engine for the daemon (0: its default)")
	rounds := flag.Int("rounds", 2, "bursts of each side, in turned order; the mean is reported")
	up := flag.Int("up", 0, "instead: this many `up -d` sandboxes alive at once (alive.go)")
	workers := flag.Int("workers", 16, "with -up: commands run at a time")
	flag.Parse()
	if *up > 0 {
		if o.Command == "scripts/bench-scale.sh" {
			o.Command = "scripts/bench-alive.sh"
		}
		benchdoc.Exit("benchscale", alive(o.Airlock, *up, *workers, o.Doc, o.Command))
		return
	}
	benchdoc.Exit("benchscale", bench(o.Airlock, *n, *creates, max(*rounds, 1), o.Doc, o.Command))
}

func bench(airlock string, n, creates, rounds int, doc, command string) error {
	ctx := context.Background()
	b, err := benchdoc.OpenBusybox(ctx, airlock, "airlock-bench-scale-", benchdoc.PlainManifest)
	if err != nil {
		return err
	}
	defer b.Close()
	r := &scaleBench{ctx: ctx, airlock: b.Airlock, cli: b.Engine, image: b.Image, p: b.Project, n: n}
	if creates > 0 {
		if err := r.p.Configure(fmt.Sprintf("[runtime]\ncreates_per_engine = %d\n", creates)); err != nil {
			return err
		}
	}
	// Warm both paths: the daemon, the supervisor volume, the image.
	if err := b.WarmUp(); err != nil {
		return err
	}
	h, err := r.p.Client().Health(ctx)
	if err != nil {
		return err
	}
	// A name of its own each time: Engine 20.10 can keep a network that
	// concurrent `docker run --rm` left "with active endpoints" (none there).
	isolated := fmt.Sprintf("airlock-bench-isolated-%d", os.Getpid())
	if _, err := r.cli.NetworkCreate(ctx, isolated, network.CreateOptions{Driver: "bridge", Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"}}); err != nil {
		return fmt.Errorf("cannot create network %s: %w", isolated, err)
	}
	defer r.cli.NetworkRemove(context.Background(), isolated)
	took, bad, err := r.rounds(r.sides(isolated), rounds)
	if err != nil {
		return err
	}
	dockerTook, isoTook, airlockTook := took[0], took[1], took[2]
	dockerBad, isoBad, airlockBad := bad[0], bad[1], bad[2]
	left := r.awaitLeft()
	_, peak, fds := procStatus(h.PID)
	rows := []benchdoc.Row{
		{Measure: fmt.Sprintf("%d concurrent `docker run --rm IMAGE sh -c 'exit K'`: wall time; wrong exit codes", n), Result: fmt.Sprintf("%s; %d", benchdoc.MS(dockerTook), dockerBad)},
		{Measure: fmt.Sprintf("%d concurrent `docker run --rm --network ISOLATED IMAGE sh -c 'exit K'` (a bridge without inter-container traffic, as airlock's)", n), Result: fmt.Sprintf("%s; %d", benchdoc.MS(isoTook), isoBad)},
		{Measure: fmt.Sprintf("%d concurrent `airlock run -- sh -c 'exit K'`: wall time; wrong exit codes", n), Result: fmt.Sprintf("%s; %d", benchdoc.MS(airlockTook), airlockBad), Target: "0 wrong"},
		{Measure: "wall time ratio airlock / docker on the default bridge", Result: benchdoc.Ratio(airlockTook, dockerTook), Target: "≤ 1.2×"},
		{Measure: "wall time ratio airlock / docker on an isolated network", Result: benchdoc.Ratio(airlockTook, isoTook), Target: "–"},
		{Measure: "wall time ratio docker on an isolated network / docker on the default bridge", Result: benchdoc.Ratio(isoTook, dockerTook), Target: "–"},
		{Measure: "containers of the runs left 2 min after the last returned", Result: strconv.Itoa(left), Target: "0"},
		{Measure: "control daemon: peak RSS (VmHWM); open fds after", Result: peak + "; " + fds, Target: "≤ 150 MB"},
	}
	benchdoc.Print(90, rows)
	intro := fmt.Sprintf("By `%s` against the Docker Engine on this machine, %s; image: the local busybox test image; %d processes started at once on each side; %d rounds, the sides in turned order (docker, isolated, airlock, then back), each wall time the mean of its rounds.", command, benchdoc.Machine(), n, rounds)
	return benchdoc.Write(doc, "Many at once", intro, rows, notes)
}

// notes is what the section says under its table.
const notes = "Each side starts its N processes at the same moment (one goroutine each) and is timed until the last exited;\n" +
	"each run exits with its index mod 5, which its process must return. airlock's runs go through one warm control\n" +
	"daemon, which makes or starts at most `runtime.creates_per_engine` (8) sandboxes at once and queues the rest in\n" +
	"order ([scaling.md](scaling.md)); `docker run` sends all N to the Engine at once. The daemon's peak RSS is its\n" +
	"VmHWM over its life (the warm-up run and the burst).\n\n" +
	"The isolated row is `docker run` on a user-defined bridge with `enable_icc=false`, which is what airlock's shared\n" +
	"network is (sandboxes must not reach each other). On a user-defined network Docker gives each container its\n" +
	"embedded DNS server and sets it up inside the container's network namespace; on Engine 20.10 that is most of\n" +
	"the gap between airlock and `docker run` on the default bridge (see [scaling.md](scaling.md#limits))."

// scaleBench is one run of the benchmark: the project it times airlock in and
// how many processes each side starts at once.
type scaleBench struct {
	ctx     context.Context
	airlock string
	cli     *dockerclient.Client
	image   string
	p       *benchdoc.Project
	n       int
}

// burst is one side: n processes (args(i) the command line of process i) at
// once, each exiting with its own code; the wall time and the wrong exit codes.
func (r *scaleBench) burst(args func(i int) []string) (time.Duration, int) {
	var wg sync.WaitGroup
	wrong := make([]bool, r.n)
	start := time.Now()
	for i := range r.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := args(i)
			err := r.p.Command(a[0], a[1:]...).Run()
			want := i % 5
			if code := benchdoc.ExitCode(err); code != want {
				wrong[i] = true
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	bad := 0
	for _, w := range wrong {
		if w {
			bad++
		}
	}
	return took, bad
}

// sides are the command lines of the three sides: docker run, the same on the
// network isolated, and airlock run.
//
// The isolated network is as airlock's shared one (a user-defined bridge, no
// traffic between its containers): Docker gives every container on a
// user-defined network its embedded DNS, whose set-up in the container's
// namespace costs the Engine CPU that the default bridge does not.
func (r *scaleBench) sides(isolated string) []func(i int) []string {
	image, airlock := r.image, r.airlock
	return []func(i int) []string{
		func(i int) []string {
			return []string{"docker", "run", "--rm", image, "sh", "-c", "exit " + strconv.Itoa(i%5)}
		},
		func(i int) []string {
			return []string{"docker", "run", "--rm", "--network", isolated, image, "sh", "-c", "exit " + strconv.Itoa(i%5)}
		},
		func(i int) []string {
			return []string{airlock, "-q", "run", "--", "sh", "-c", "exit " + strconv.Itoa(i%5)}
		},
	}
}

// rounds runs a burst of every side in each round, in turned order (docker,
// isolated, airlock; then airlock, isolated, docker; …): a burst leaves the
// Engine busy for a while (removals, its own clean-up), which the next side
// would pay. It returns each side's mean wall time and its wrong exit codes.
func (r *scaleBench) rounds(sides []func(i int) []string, rounds int) ([]time.Duration, []int, error) {
	took := make([]time.Duration, len(sides))
	bad := make([]int, len(sides))
	for round := range rounds {
		for k := range sides {
			side := k
			if round%2 == 1 {
				side = len(sides) - 1 - k
			}
			d, b := r.burst(sides[side])
			took[side] += d
			bad[side] += b
			if err := benchdoc.Settled(r.ctx, r.cli, r.p.Dir); err != nil {
				return nil, nil, err
			}
		}
	}
	for k := range took {
		took[k] /= time.Duration(rounds)
	}
	return took, bad, nil
}

// awaitLeft waits up to 2 minutes until every run's sandbox is removed (the
// daemon removes them after the CLIs returned) and returns how many
// containers are left (-1 when the Engine never said).
func (r *scaleBench) awaitLeft() int {
	left := -1
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := r.cli.ContainerList(r.ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "dev.airlock.project="+r.p.Dir))})
		if err == nil {
			if left = len(list); left == 0 {
				break
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return left
}

// procStatus is a process's RSS, its peak RSS (VmHWM) and its open
// descriptors, as /proc says ("?" for what it does not).
func procStatus(pid int) (rss, peak, fds string) {
	rss, peak, fds = "?", "?", "?"
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, ":")
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				continue
			}
			switch k {
			case "VmRSS":
				rss = fmt.Sprintf("%.0f MiB", float64(kb)/1024)
			case "VmHWM":
				peak = fmt.Sprintf("%.0f MiB", float64(kb)/1024)
			}
		}
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		fds = strconv.Itoa(len(ents))
	}
	return rss, peak, fds
}
