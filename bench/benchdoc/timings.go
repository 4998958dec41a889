package benchdoc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	dockerclient "github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/test/testenv"
)

// Timings are the samples of one measure.
type Timings []time.Duration

// Add adds a sample taken by a timed call, or returns the call's error:
// `if err := t.Add(timed()); err != nil`.
func (t *Timings) Add(d time.Duration, err error) error {
	if err != nil {
		return err
	}
	*t = append(*t, d)
	return nil
}

// Timed runs c and returns how long it took and its output (stdout and
// stderr); a failure's error holds the command line and the output.
func Timed(c *exec.Cmd) (time.Duration, string, error) {
	start := time.Now()
	out, err := c.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return 0, string(out), fmt.Errorf("%s: %v\n%s", strings.Join(c.Args, " "), err, out)
	}
	return d, string(out), nil
}

// ExitCode is the exit code of a command's error (0 for none, -1 when it did
// not exit).
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// Settled waits (untimed) until a project's sandbox objects are gone on an
// Engine: airlock run returns once the daemon took their removal over, and no
// run should pay for the last one's.
func Settled(ctx context.Context, cli dockerclient.APIClient, project string) error {
	left, err := testenv.AwaitNoLeftovers(ctx, cli, "dev.airlock.project", project, 30*time.Second)
	if err == nil && len(left) > 0 {
		err = fmt.Errorf("sandbox objects left 30 s after a run: %v", left)
	}
	return err
}

// MS formats d in whole milliseconds.
func MS(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// Ratio formats a/b as "1.23×".
func Ratio(a, b time.Duration) string { return fmt.Sprintf("%.2f×", float64(a)/float64(b)) }
