package execs

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/airlock-dev/airlock/userconfig"
)

// cappedOutput is one output file of an API exec, bounded: it takes at most
// max bytes of the command's output; past them, or when the file cannot be
// written (the host's disk is full), it ends the file with a marker line on
// a line of its own and discards the rest, still accepting every write so
// that the command runs to its end. The file holds at most max bytes plus
// the marker.
type cappedOutput struct {
	w         io.Writer
	max       int64
	n         int64
	truncated atomic.Bool
	// onCut is told why the output was cut (the daemon's log).
	onCut func(why string)
}

func newCappedOutput(w io.Writer, max int64, onCut func(string)) *cappedOutput {
	if max <= 0 {
		max = userconfig.DefaultExecOutputMax
	}
	return &cappedOutput{w: w, max: max, onCut: onCut}
}

func (c *cappedOutput) Write(p []byte) (int, error) {
	if c.truncated.Load() {
		return len(p), nil
	}
	part := p
	if room := c.max - c.n; int64(len(part)) > room {
		part = part[:room]
	}
	n, err := c.w.Write(part)
	c.n += int64(n)
	switch {
	case err != nil:
		c.cut(fmt.Sprintf("cannot write the rest: %v", err))
	case len(part) < len(p):
		c.cut(fmt.Sprintf("it reached %s (artifacts.exec_output_max)", userconfig.FormatSize(c.max)))
	}
	return len(p), nil
}

// cut ends the file with the marker line; later writes are discarded.
func (c *cappedOutput) cut(why string) {
	c.truncated.Store(true)
	_, _ = fmt.Fprintf(c.w, "\n[airlock: output truncated: %s; the rest was discarded]\n", why)
	if c.onCut != nil {
		c.onCut(why)
	}
}

// Truncated reports whether the output was cut.
func (c *cappedOutput) Truncated() bool { return c.truncated.Load() }
