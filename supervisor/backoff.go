package supervisor

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// LinearBackOff is a backoff.BackOff whose n-th NextBackOff since the last
// Reset is n × Unit: before restart n a daemon waits n seconds.
type LinearBackOff struct {
	Unit time.Duration
	n    int
}

var _ backoff.BackOff = (*LinearBackOff)(nil)

// NextBackOff returns the next delay, one Unit longer than the last.
func (b *LinearBackOff) NextBackOff() time.Duration {
	b.n++
	return time.Duration(b.n) * b.Unit
}

// Reset starts over at one Unit.
func (b *LinearBackOff) Reset() { b.n = 0 }

// Attempt returns how many delays were handed out since the last Reset.
func (b *LinearBackOff) Attempt() int { return b.n }

// DefaultResetAfter is how long a run must last for the attempt count to
// reset.
const DefaultResetAfter = 60 * time.Second

// decision is what a daemon does after one launch ends.
type decision int

const (
	decideRestart decision = iota // wait delay, then launch again
	decideDone                    // the policy does not restart after this exit
	decideGiveUp                  // max_restarts reached
)

// restarter applies a daemon's restart policy and max_restarts to its runs.
type restarter struct {
	policy     string
	linear     *LinearBackOff
	b          backoff.BackOff
	resetAfter time.Duration
}

// newRestarter: maxRestarts = N allows N restarts (N+1 launches), 0 none
// counted (unlimited); delays are multiples of unit; a run that lasted
// resetAfter resets the count.
func newRestarter(policy string, maxRestarts int, unit, resetAfter time.Duration) *restarter {
	lin := &LinearBackOff{Unit: unit}
	var b backoff.BackOff = lin
	if maxRestarts > 0 {
		b = backoff.WithMaxRetries(lin, uint64(maxRestarts))
	}
	return &restarter{policy: policy, linear: lin, b: b, resetAfter: resetAfter}
}

// next decides after a launch that ran for ranFor and ended with st (or did
// not start at all: spawnFailed, which counts as a failure and an attempt).
// attempt is the number of the coming restart, from 1.
func (r *restarter) next(st exitStatus, spawnFailed bool, ranFor time.Duration) (d decision, attempt int, delay time.Duration) {
	if !spawnFailed && ranFor >= r.resetAfter {
		r.b.Reset()
	}
	failed := spawnFailed || st.signaled() || st.code != 0
	if r.policy == RestartOnFailure && !failed {
		return decideDone, 0, 0
	}
	delay = r.b.NextBackOff()
	if delay == backoff.Stop {
		return decideGiveUp, 0, 0
	}
	return decideRestart, r.linear.Attempt(), delay
}
