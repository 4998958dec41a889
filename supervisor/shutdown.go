package supervisor

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// stopAll asks every daemon to stop at once (each signals its own process
// group; see daemonRun.terminate).
func (s *supervisor) stopAll() {
	for _, d := range s.daemons {
		d.stop()
	}
}

// collect waits for every daemon to report its end and prints one line per
// daemon in completion order (with spinners for the ones still stopping when
// stderr is a terminal).
func (s *supervisor) collect() {
	v := &shutdownView{w: s.msgs, tty: s.tty, color: s.color, quiet: s.quiet}
	remaining := map[string]bool{}
	for _, d := range s.daemons {
		remaining[d.spec.Name] = true
	}
	var tick <-chan time.Time
	if v.tty && !v.quiet && len(remaining) > 0 {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		tick = t.C
	}
	v.draw(remaining)
	for len(remaining) > 0 {
		select {
		case r := <-s.results:
			delete(remaining, r.name)
			v.done(r, remaining)
		case <-tick:
			v.frame++
			v.draw(remaining)
		}
	}
	for _, d := range s.daemons {
		d.closeLogs()
	}
}

// shutdownView prints the shutdown lines.
type shutdownView struct {
	w     io.Writer
	tty   bool // draw spinners
	color bool
	quiet bool
	frame int
	drawn int // spinner lines currently on screen
}

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

const (
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiDim    = "\x1b[2m"
	ansiReset  = "\x1b[0m"
)

func (v *shutdownView) done(r stopResult, remaining map[string]bool) {
	if v.quiet {
		return
	}
	var b strings.Builder
	v.clear(&b)
	mark, word, colour := "✔", "shut down", ansiGreen
	switch {
	case r.killed:
		word, colour = "killed", ansiYellow
	case r.gaveUp != nil:
		mark, colour = "✘", ansiRed
		word = fmt.Sprintf("gave up after %d launches (%s)", r.gaveUp.launches, r.gaveUp.last)
	}
	if v.color {
		mark = colour + mark + ansiReset
	}
	fmt.Fprintf(&b, "%s daemon %s: %s\n", mark, r.name, word)
	_, _ = io.WriteString(v.w, b.String())
	v.draw(remaining)
}

// draw redraws one spinner line per daemon still stopping.
func (v *shutdownView) draw(remaining map[string]bool) {
	if v.quiet || !v.tty {
		return
	}
	names := slices.Sorted(maps.Keys(remaining))
	var b strings.Builder
	v.clear(&b)
	frame := spinnerFrames[v.frame%len(spinnerFrames)]
	for _, n := range names {
		if v.color {
			fmt.Fprintf(&b, "%s%s%s daemon %s: stopping\n", ansiDim, frame, ansiReset, n)
		} else {
			fmt.Fprintf(&b, "%s daemon %s: stopping\n", frame, n)
		}
	}
	v.drawn = len(names)
	_, _ = io.WriteString(v.w, b.String())
}

// clear moves the cursor up over the spinner lines and erases them.
func (v *shutdownView) clear(b *strings.Builder) {
	if v.tty && v.drawn > 0 {
		fmt.Fprintf(b, "\x1b[%dA\x1b[J", v.drawn)
		v.drawn = 0
	}
}
