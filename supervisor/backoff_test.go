package supervisor

import (
	"syscall"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

func TestLinearBackOff(t *testing.T) {
	b := &LinearBackOff{Unit: time.Second}
	for n := 1; n <= 5; n++ {
		if d := b.NextBackOff(); d != time.Duration(n)*time.Second {
			t.Fatalf("delay %d = %v", n, d)
		}
	}
	b.Reset()
	if d := b.NextBackOff(); d != time.Second || b.Attempt() != 1 {
		t.Fatalf("after Reset: %v, attempt %d", d, b.Attempt())
	}
	// It composes with the library's helpers like any BackOff.
	capped := backoff.WithMaxRetries(&LinearBackOff{Unit: time.Millisecond}, 2)
	got := []time.Duration{capped.NextBackOff(), capped.NextBackOff(), capped.NextBackOff()}
	if got[0] != time.Millisecond || got[1] != 2*time.Millisecond || got[2] != backoff.Stop {
		t.Fatalf("with max retries: %v", got)
	}
}

// TestRestarterDecisions drives the policy with injected run lengths (no
// clock): decisions, attempts, delays, max_restarts and the 60-unit reset.
func TestRestarterDecisions(t *testing.T) {
	const unit = time.Second
	ok, fail, sig := exitStatus{}, exitStatus{code: 3}, exitStatus{signal: syscall.SIGKILL}
	type step struct {
		st      exitStatus
		spawn   bool // spawn failed
		ran     time.Duration
		dec     decision
		attempt int
	}
	cases := map[string]struct {
		policy string
		max    int
		steps  []step
	}{
		"always exit 0, max 2": {RestartAlways, 2, []step{
			{st: ok, dec: decideRestart, attempt: 1}, {st: ok, dec: decideRestart, attempt: 2}, {st: ok, dec: decideGiveUp}}},
		"on-failure exit 0": {RestartOnFailure, 2, []step{{st: ok, dec: decideDone}}},
		"on-failure signal, max 1": {RestartOnFailure, 1, []step{
			{st: sig, dec: decideRestart, attempt: 1}, {st: sig, dec: decideGiveUp}}},
		"on-failure spawn failures count": {RestartOnFailure, 1, []step{
			{spawn: true, dec: decideRestart, attempt: 1}, {spawn: true, dec: decideGiveUp}}},
		"unlimited": {RestartOnFailure, 0, []step{
			{st: fail, dec: decideRestart, attempt: 1}, {st: fail, dec: decideRestart, attempt: 2},
			{st: fail, dec: decideRestart, attempt: 3}, {st: fail, dec: decideRestart, attempt: 4}}},
		"reset after 60 units": {RestartAlways, 2, []step{
			{st: fail, dec: decideRestart, attempt: 1}, {st: fail, dec: decideRestart, attempt: 2},
			{st: fail, ran: 60 * unit, dec: decideRestart, attempt: 1}, {st: fail, ran: 59 * unit, dec: decideRestart, attempt: 2},
			{st: fail, dec: decideGiveUp}}},
		"a failed spawn never resets": {RestartAlways, 1, []step{
			{spawn: true, dec: decideRestart, attempt: 1}, {spawn: true, ran: time.Hour, dec: decideGiveUp}}},
	}
	for name, c := range cases {
		r := newRestarter(c.policy, c.max, unit, 60*unit)
		for i, s := range c.steps {
			dec, attempt, delay := r.next(s.st, s.spawn, s.ran)
			if dec != s.dec || attempt != s.attempt {
				t.Errorf("%s, step %d: decision %d attempt %d; want %d %d", name, i+1, dec, attempt, s.dec, s.attempt)
			}
			if dec == decideRestart && delay != time.Duration(attempt)*unit {
				t.Errorf("%s, step %d: delay %v before restart %d", name, i+1, delay, attempt)
			}
		}
	}
}
