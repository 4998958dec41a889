package benchdoc

import (
	"fmt"
	"strings"
	"time"
)

// Alive is n project dirs of one user (one control daemon), each with the
// same manifest, in which `airlock up -d` keeps as many sandboxes alive at
// once, the commands run workers at a time.
type Alive struct {
	Dirs    []string
	p       *Project
	airlock string
	workers int
}

// Alive makes n project dirs (Projects) with manifest, for the airlock binary.
func (p *Project) Alive(airlock, manifest string, n, workers int) (*Alive, error) {
	dirs, err := p.Projects(n, manifest)
	if err != nil {
		return nil, err
	}
	return &Alive{Dirs: dirs, p: p, airlock: airlock, workers: workers}, nil
}

// Each runs f on every dir, workers at a time, and returns the wall time and
// the errors, each naming its dir.
func (a *Alive) Each(f func(i int, dir string) error) (time.Duration, []error) {
	return Each(len(a.Dirs), a.workers, func(i int) error {
		if err := f(i, a.Dirs[i]); err != nil {
			return fmt.Errorf("%s: %w", a.Dirs[i], err)
		}
		return nil
	})
}

// Up runs `airlock -q up -d` in every dir (it returns once the sandbox is
// ready): the wall time and the failures.
func (a *Alive) Up() (time.Duration, []error) { return a.each("up", "-d") }

// Down runs `airlock -q down` in every dir: the wall time and the failures.
func (a *Alive) Down() (time.Duration, []error) { return a.each("down") }

func (a *Alive) each(args ...string) (time.Duration, []error) {
	return a.Each(func(_ int, dir string) error {
		if _, out, err := a.p.TimedIn(dir, a.airlock, append([]string{"-q"}, args...)...); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	})
}

// PS times `airlock ps` (the CLI's whole run) 10 times, each of which must
// list a sandbox for every dir.
func (a *Alive) PS() (Timings, error) {
	var ps Timings
	for range 10 {
		d, out, err := a.p.Timed(a.airlock, "ps")
		if err != nil || strings.Count(out, "\n") < len(a.Dirs)+1 {
			return nil, fmt.Errorf("ps with %d sandboxes: %v\n%s", len(a.Dirs), err, out)
		}
		ps = append(ps, d)
	}
	return ps, nil
}
