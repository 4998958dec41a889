package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/bench/benchdoc"
)

// stepsLine is the line `airlock --log-level debug run` ends with: the
// command's own steps, each with the time since its packages began to
// initialise ("init 8.1ms, manifest 9.0ms, …").
var stepsLine = regexp.MustCompile(`airlock: debug: steps of this command \(since its start\): (.*)`)

// daemonLine is one step of the daemon's breakdown ("airlock: debug:
// created → started: 7ms").
var daemonLine = regexp.MustCompile(`airlock: debug: ([a-z ()→,]+): (\d+)ms`)

// warmSteps are the medians of the steps of warm runs: the CLI's (the time
// from one step to the next, in the order they came) and the daemon's.
type warmSteps struct {
	names []string
	cli   map[string]benchdoc.Timings // "manifest → daemon": the time between them
	dmn   map[string]benchdoc.Timings
	order []string // the daemon's steps in their order
}

// sampleSteps runs n warm runs with --log-level debug (untimed: the debug
// output waits for the sandbox's removal) and keeps their steps.
func (r *poolBench) sampleSteps(n int) error {
	r.steps = warmSteps{cli: map[string]benchdoc.Timings{}, dmn: map[string]benchdoc.Timings{}}
	for i := 0; i < n; i++ {
		_, out, err := r.p.Timed(r.airlock, "--log-level", "debug", "run", "--", "true")
		if err != nil {
			return err
		}
		if err := r.steps.add(out); err != nil {
			return err
		}
		if err := r.settle(2); err != nil {
			return err
		}
	}
	return nil
}

// add reads one run's debug output.
func (s *warmSteps) add(out string) error {
	m := stepsLine.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("no steps line in the output of a debug run:\n%s", out)
	}
	prev, prevAt := "start", time.Duration(0)
	for _, part := range strings.Split(m[1], ", ") {
		i := strings.LastIndexByte(part, ' ')
		ms, err := strconv.ParseFloat(strings.TrimSuffix(part[i+1:], "ms"), 64)
		if i < 0 || err != nil {
			return fmt.Errorf("cannot read the step %q", part)
		}
		name, at := part[:i], time.Duration(ms*float64(time.Millisecond))
		key := prev + " → " + name
		if !slices.Contains(s.names, key) {
			s.names = append(s.names, key)
		}
		t := s.cli[key]
		t.Add(at-prevAt, nil)
		s.cli[key] = t
		prev, prevAt = name, at
	}
	for _, dm := range daemonLine.FindAllStringSubmatch(out, -1) {
		ms, _ := strconv.Atoi(dm[2])
		if !slices.Contains(s.order, dm[1]) {
			s.order = append(s.order, dm[1])
		}
		t := s.dmn[dm[1]]
		t.Add(time.Duration(ms)*time.Millisecond, nil)
		s.dmn[dm[1]] = t
	}
	return nil
}

// rows are the steps' medians.
func (s *warmSteps) rows() []benchdoc.Row {
	var rows []benchdoc.Row
	for _, k := range s.names {
		rows = append(rows, benchdoc.Row{Measure: "warm run, the CLI's step " + k + " (median)", Result: fmt.Sprintf("%.1f ms", float64(benchdoc.Median(s.cli[k]).Microseconds())/1000)})
	}
	for _, k := range s.order {
		rows = append(rows, benchdoc.Row{Measure: "warm run, the daemon's step " + k + " (median, its clock)", Result: benchdoc.MS(benchdoc.Median(s.dmn[k]))})
	}
	return rows
}
