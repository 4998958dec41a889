package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/airlock-dev/airlock/manifest/specrules"
)

// A parked supervisor (Spec.Park) is a pooled sandbox's: it starts what does
// not depend on the run (the forwards and the static daemons), reports
// supervisor.parked once they are ready, and waits without a timeout for a
// claim: one delivery on the spec's socket whose ClaimKey holds the run's main
// command (a Claim) and whose other keys are the values. It refuses a delivery
// without a valid claim, and a valid one while a static daemon is down for
// good (the answer then starts with UnhealthyPrefix); either way it goes on
// waiting. After an accepted claim it resolves the rest of the env, starts the
// other daemons and continues as any run. A terminating signal while parked
// stops the daemons and ends the run with 0.

// ClaimKey is the reserved key of a delivery to a parked supervisor: its value
// is the JSON-encoded Claim.
const ClaimKey = "airlock.claim"

// UnhealthyPrefix starts the answer to a claim refused because a static
// daemon is down for good: "unhealthy: daemon db exited (code 1)".
const UnhealthyPrefix = "unhealthy: "

// Claim is the run a parked supervisor waits for: its main command, or none
// (Idle) for a sandbox that runs its daemons until stopped (airlock up, an
// API create of kind up).
type Claim struct {
	// Argv is the main command (required unless Idle).
	Argv []string `json:"argv"`
	// Idle makes the sandbox an idle one: no main command (Argv empty); the
	// env and cwd still become the environment of its execs.
	Idle bool `json:"idle,omitempty"`
	// Cwd, when set, replaces the spec's main.cwd.
	Cwd string `json:"cwd,omitempty"`
	// Env is appended to the spec's main.env (the run's -e); an entry may
	// take a value of the delivery by its key.
	Env []EnvEntry `json:"env,omitempty"`
	// Quiet is or'ed with the spec's and the supervisor's.
	Quiet bool `json:"quiet,omitempty"`
	// EndMarker replaces the spec's end_marker (empty: none).
	EndMarker string `json:"end_marker,omitempty"`
	// Stdin gives the main command the supervisor's stdin; without it, the
	// main command reads /dev/null.
	Stdin bool `json:"stdin,omitempty"`
}

// validate checks a claim; the error names the field, never a value.
func (c *Claim) validate() error {
	switch {
	case c.Idle && len(c.Argv) > 0:
		return errors.New("cannot use the claim: argv is set, yet idle is true")
	case c.Idle:
	case len(c.Argv) == 0:
		return errors.New("cannot use the claim: argv is empty")
	case c.Argv[0] == "":
		return errors.New("cannot use the claim: argv[0] is empty")
	}
	if c.Cwd != "" {
		if err := specrules.Cwd(c.Cwd); err != nil {
			return fmt.Errorf("cannot use the claim: cwd: %w", err)
		}
	}
	if err := checkEnv("env", c.Env); err != nil {
		return fmt.Errorf("cannot use the claim: %w", err)
	}
	if err := checkEndMarker(c.EndMarker); err != nil {
		return fmt.Errorf("cannot use the claim: %w", err)
	}
	return nil
}

// takeClaim decodes and checks the claim of a delivery and removes its key
// from the values, which are the rest.
func takeClaim(values *Secrets) (*Claim, error) {
	raw, ok := values.values[ClaimKey]
	if !ok {
		return nil, fmt.Errorf("cannot use the delivery: it holds no %q (this sandbox is parked and waits for a claim)", ClaimKey)
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	var c Claim
	if err := dec.Decode(&c); err != nil {
		// The error may quote part of the claim, which may hold an env
		// value: keep an unknown field's name only.
		if _, field, ok := strings.Cut(err.Error(), "json: unknown field "); ok {
			return nil, fmt.Errorf("cannot decode the claim: unknown field %s", field)
		}
		return nil, errors.New("cannot decode the claim: want a JSON object (argv, idle, cwd, env, quiet, end_marker, stdin)")
	}
	if dec.More() {
		return nil, errors.New("cannot decode the claim: trailing data after the JSON object")
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	delete(values.values, ClaimKey)
	return &c, nil
}

// apply makes the claim the spec's main command (none when idle).
func (c *Claim) apply(s *Spec) {
	s.Main.Argv = c.Argv
	if c.Cwd != "" {
		s.Main.Cwd = c.Cwd
	}
	s.Main.Env = append(s.Main.Env[:len(s.Main.Env):len(s.Main.Env)], c.Env...)
	s.EndMarker = c.EndMarker
}

// staticDaemons names the daemons a parked supervisor starts before the claim:
// those whose env takes no delivered value and whose after daemons are static.
func (s *Spec) staticDaemons() map[string]bool {
	byName := make(map[string]*Daemon, len(s.Daemons))
	for _, d := range s.Daemons {
		byName[d.Name] = d
	}
	static := map[string]bool{}
	seen := map[string]bool{}
	var isStatic func(d *Daemon) bool
	isStatic = func(d *Daemon) bool {
		if seen[d.Name] {
			return static[d.Name] // decided, or on a cycle: not static
		}
		seen[d.Name] = true
		for _, e := range d.Env {
			if e.Value == nil {
				return false
			}
		}
		for _, a := range d.After {
			if dep, ok := byName[a]; !ok || !isStatic(dep) {
				return false
			}
		}
		static[d.Name] = true
		return true
	}
	for _, d := range s.Daemons {
		isStatic(d)
	}
	return static
}

// health returns the refusal of a claim when a running daemon is down for
// good, naming each such daemon and how it ended.
func (s *supervisor) health() error {
	var down []string
	for _, d := range s.running {
		if how := d.down(); how != "" {
			down = append(down, "daemon "+d.spec.Name+" "+how)
		}
	}
	if len(down) > 0 {
		return errors.New(UnhealthyPrefix + strings.Join(down, "; "))
	}
	return nil
}

// down says how a daemon that will not run again ended ("exited (code 1)",
// "gave up after 3 launches (exit 1)"), or "" while it runs or waits for a
// restart (a one-shot, never restarted, is not down once it completed).
func (d *daemonRun) down() string {
	if how := d.downHow.Load(); how != nil {
		return *how
	}
	return ""
}

// park reports supervisor.parked and waits for an accepted claim on dl, and
// returns it with the delivery's other values. A terminating signal ends the
// wait: stop is true then (the run ends with 0).
func (s *supervisor) park(dl *deliveryListener, sigs <-chan os.Signal) (claim *Claim, values *Secrets, stop bool, err error) {
	defer dl.close() // one delivery was taken, or the wait stopped
	return s.waitClaim(sigs, func() (*Claim, *Secrets, error) {
		var c *Claim
		v, err := dl.take(0, func(v *Secrets) error {
			got, err := s.checkClaim(v)
			if err != nil {
				return err
			}
			c = got
			return nil
		})
		return c, v, err
	}, dl.close)
}

// parkStdin is park with the claim on the first line of stdin (ClaimStdin):
// read a byte at a time, so that what follows the line is left for the main
// command. A stream that ends first, or a claim refused, ends the wait with
// the error (the host sees the run fail).
func (s *supervisor) parkStdin(stdin *os.File, sigs <-chan os.Signal) (claim *Claim, values *Secrets, stop bool, err error) {
	return s.waitClaim(sigs, func() (*Claim, *Secrets, error) {
		v, err := readClaimLine(stdin)
		if err != nil {
			return nil, nil, err
		}
		c, err := s.checkClaim(v)
		if err != nil {
			v.forget()
			return nil, nil, err
		}
		return c, v, nil
	}, nil)
}

// waitClaim reports supervisor.parked and runs wait, which returns a claim
// with the delivery's other values, until it returns or a terminating signal
// comes first: stop is true then. On that signal, cancel (when not nil) makes
// wait return, and the values of a claim it still took are forgotten; without
// cancel the wait is left behind.
func (s *supervisor) waitClaim(sigs <-chan os.Signal, wait func() (*Claim, *Secrets, error), cancel func()) (claim *Claim, values *Secrets, stop bool, err error) {
	s.status.emit(StatusEvent{Kind: KindSupervisorParked})
	type taken struct {
		claim  *Claim
		values *Secrets
		err    error
	}
	ch := make(chan taken, 1)
	go func() {
		c, v, err := wait()
		ch <- taken{c, v, err}
	}()
	for {
		select {
		case t := <-ch:
			return t.claim, t.values, false, t.err
		case sig := <-sigs:
			if terminatingSignals[sig] {
				if cancel != nil {
					cancel()
					if t := <-ch; t.values != nil {
						t.values.forget()
					}
				}
				return nil, nil, true, nil
			}
		}
	}
}

// checkClaim takes the claim out of a delivery's values, and refuses it while
// a running daemon is down for good.
func (s *supervisor) checkClaim(v *Secrets) (*Claim, error) {
	c, err := takeClaim(v)
	if err != nil {
		return nil, err
	}
	if err := s.health(); err != nil {
		return nil, err
	}
	return c, nil
}

// readClaimLine reads one delivery (a JSON object of string values) ended by
// a newline from r, one byte at a time.
func readClaimLine(r io.Reader) (*Secrets, error) {
	var line []byte
	b := make([]byte, 1)
	for {
		n, err := r.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			if len(line) >= maxSecretsSize {
				return nil, fmt.Errorf("cannot read the claim: longer than %d bytes", maxSecretsSize)
			}
			line = append(line, b[0])
			continue
		}
		if err != nil {
			return nil, errors.New("cannot read the claim: its stream ended before it")
		}
	}
	values := map[string]string{}
	if err := json.Unmarshal(line, &values); err != nil {
		return nil, errors.New("cannot decode the claim's delivery: want a JSON object of string values")
	}
	return &Secrets{values: values}, nil
}
