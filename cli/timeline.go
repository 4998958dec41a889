package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/startup"
)

// timeline is when a command reached each of its steps, measured from the
// start of the program's own packages (startup.Began): `--log-level debug`
// prints a run's after its daemon's breakdown, so that the time of a warm start
// is read step by step (docs/benchmarks.md, "Warm start").
type timeline struct {
	marks []timelineMark
}

type timelineMark struct {
	name string
	at   time.Duration
}

// mark notes that the command reached step name now.
func (t *timeline) mark(name string) {
	t.marks = append(t.marks, timelineMark{name, time.Since(startup.Began)})
}

// String is the steps in order, each with the time since the start:
// "init 8.1ms, manifest 9.0ms, …".
func (t *timeline) String() string {
	parts := make([]string, len(t.marks))
	for i, m := range t.marks {
		parts[i] = fmt.Sprintf("%s %.1fms", m.name, float64(m.at.Microseconds())/1000)
	}
	return strings.Join(parts, ", ")
}
