// Command benchstart measures the CLI's start: the time its packages take to
// initialise (GODEBUG=inittrace=1, the sum of every package's init) and the
// wall time of `airlock version` (exec, initialisation, the command, exit),
// interleaved with /bin/true's as the floor of a process; it prints the figures
// and records them in docs/benchmarks.md under "## CLI start". It is run by
// scripts/bench-start.sh.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/bench/benchdoc"
)

func main() {
	o := benchdoc.Flags("scripts/bench-start.sh")
	runs := flag.Int("runs", 40, "samples of each measure")
	flag.Parse()
	benchdoc.Exit("benchstart", bench(o.Airlock, o.Doc, o.Command, *runs))
}

// initLine is one line of GODEBUG=inittrace=1: "init pkg @2.1 ms, 0.31 ms clock, …".
var initLine = regexp.MustCompile(`^init (\S+) @[0-9.]+ ms, ([0-9.]+) ms clock`)

// inits runs airlock version once with inittrace and returns the sum of the
// packages' init times and the heaviest package's.
func inits(airlock string) (total time.Duration, top string, topT time.Duration, err error) {
	c := exec.Command(airlock, "version")
	c.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		return 0, "", 0, fmt.Errorf("airlock version: %w: %s", err, stderr.String())
	}
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		m := initLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ms, _ := strconv.ParseFloat(m[2], 64)
		d := time.Duration(ms * float64(time.Millisecond))
		total += d
		if d > topT {
			top, topT = m[1], d
		}
	}
	return total, top, topT, nil
}

func timed(name string, args ...string) (time.Duration, error) {
	c := exec.Command(name, args...)
	start := time.Now()
	out, err := c.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %s", name, err, out)
	}
	return time.Since(start), nil
}

func bench(airlock, doc, command string, runs int) error {
	var total, wall, floor benchdoc.Timings
	heaviest := map[string]benchdoc.Timings{}
	for i := 0; i < runs; i++ {
		t, top, topT, err := inits(airlock)
		if err != nil {
			return err
		}
		total = append(total, t)
		heaviest[top] = append(heaviest[top], topT)
		if err := wall.Add(timed(airlock, "version")); err != nil {
			return err
		}
		if err := floor.Add(timed("/bin/true")); err != nil {
			return err
		}
	}
	top, n := "", 0
	keys := make([]string, 0, len(heaviest))
	for k := range heaviest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(heaviest[k]) > n {
			top, n = k, len(heaviest[k])
		}
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	rows := []benchdoc.Row{
		{Measure: fmt.Sprintf("the CLI's packages' init, summed (GODEBUG=inittrace=1; median of %d)", runs), Result: ms(benchdoc.Median(total)), Target: "≤ 8 ms"},
		{Measure: "the heaviest package's init (the one most often heaviest; median)", Result: fmt.Sprintf("%s: %s", top, ms(benchdoc.Median(heaviest[top])))},
		{Measure: "`airlock version`, wall (median)", Result: ms(benchdoc.Median(wall))},
		{Measure: "`/bin/true`, wall: a process's floor here (median)", Result: ms(benchdoc.Median(floor))},
	}
	benchdoc.Print(70, rows)
	intro := fmt.Sprintf("By `%s` on this machine, %s; the three measures interleaved.", command, benchdoc.Machine())
	return benchdoc.Write(doc, "CLI start", intro, rows, notes)
}

const notes = "Every command starts with these inits, whether or not it reads a compose file. The JSON Schema library\n" +
	"compose-go validates compose files with used to be the heaviest (3-5 ms: it compiled the meta-schemas of five\n" +
	"drafts in its init); airlock's copy of it (third_party/jsonschema) compiles them on first use. The heaviest now\n" +
	"compiles regular expressions of image references. The CLI keeps the garbage collector off while its packages\n" +
	"initialise (they allocate about 2 MB), and turns it on as its main starts."
