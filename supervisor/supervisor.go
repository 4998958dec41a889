// Package supervisor runs the sandbox's daemons and main command as PID 1
// from a spec file.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Options are the inputs of Run besides the spec file.
type Options struct {
	SpecPath    string
	SpecJSON    string // the spec itself, instead of SpecPath
	SecretsPath string // "" for none
	Quiet       bool   // or'ed with the spec's quiet

	// Stdin, Stdout and Stderr are the supervisor's standard files; the main
	// command inherits them. Nil means os.Stdin, os.Stdout and os.Stderr.
	Stdin, Stdout, Stderr *os.File
	// Messages receives the shutdown lines and warnings; nil means Stderr.
	Messages io.Writer

	// Environ is the image env every process starts from; nil means
	// os.Environ().
	Environ []string
	// BackoffUnit is the restart delay unit (default one second: restart n
	// waits n units) and ResetAfter the run length that resets the attempt
	// count (default 60 s). Tests change them.
	BackoffUnit time.Duration
	ResetAfter  time.Duration
	// Seal: the supervisor is PID 1 of the sandbox's PID namespace, so at an
	// end marker with no daemon left it can end every other process of the
	// sandbox and say so in the marker (a sealed end).
	Seal bool
}

// supervisor is one Run.
type supervisor struct {
	spec     *Spec
	mainCred *syscall.Credential // the main command's user; nil: the supervisor's
	daemons  []*daemonRun        // every daemon of the spec
	running  []*daemonRun        // the daemons started, in start order
	mainBase []string            // the main command's env before its entries (Spec.Park)
	results  chan stopResult
	status   *statusWriter
	msgs     io.Writer
	tty      bool
	color    bool
	quiet    bool
	// view and remaining are the shutdown lines' state across collects.
	view      *shutdownView
	remaining map[string]bool
}

// Run supervises one sandbox and returns the exit code the process ends
// with: the main command's (128+N after signal N), or 125/126/127 with an
// error to print when the start failed.
func Run(o Options) (int, error) {
	o.defaults()
	// Catch the forwarded signals first, so a SIGTERM during the start
	// aborts it cleanly instead of killing the supervisor.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	spec, secrets, claims, secretsErr, err := loadStart(o)
	if err != nil {
		return ExitAirlock, err
	}
	if claims != nil {
		defer claims.close()
	}
	s := &supervisor{
		spec:    spec,
		results: make(chan stopResult, len(spec.Daemons)),
		msgs:    o.Messages,
		quiet:   o.Quiet || spec.Quiet,
	}
	s.tty = isTerminal(o.Stderr) && o.Messages == io.Writer(o.Stderr)
	s.color = s.tty && os.Getenv("NO_COLOR") == ""

	r, err := startReaper()
	if err != nil {
		return ExitAirlock, err
	}
	defer r.close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return ExitAirlock, fmt.Errorf("cannot open %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	if s.status, err = openStatus(spec.StatusFile); err != nil {
		return ExitAirlock, err
	}
	s.status.readFile = spec.StatusReadFile
	defer s.status.close()

	readyResults := make(chan readyResult, len(spec.Daemons))
	// Parked, the daemons that take no value start now, the rest after the
	// claim; else all start now.
	var static map[string]bool
	if spec.Park {
		static = spec.staticDaemons()
	}
	mainEnv, err := s.prepare(o, r, devnull, secrets, secretsErr, readyResults, static)
	secrets.forget() // every process env is resolved (parked: the rest waits for the claim's values)
	if err != nil {
		for _, d := range s.daemons {
			d.closeLogs()
		}
		s.status.emit(StatusEvent{Kind: KindSupervisorFailed, Reason: err.Error()})
		return ExitAirlock, err
	}

	fw, err := startForwards(spec.Forwards)
	if err != nil {
		for _, d := range s.daemons {
			d.closeLogs()
		}
		s.status.emit(StatusEvent{Kind: KindSupervisorFailed, Reason: err.Error()})
		return ExitAirlock, err
	}
	defer fw.close()
	first := s.daemons
	if spec.Park {
		first = s.daemonsWhere(static, true)
	}
	s.start(first)
	if code, err := s.awaitReady(first, readyResults, sigs); err != nil || code != 0 {
		return s.abort(code, err)
	}
	stdin := o.Stdin
	if spec.Park {
		var stop bool
		var code int
		mainEnv, stdin, stop, code, err = s.claimed(o, claims, sigs, static, readyResults, devnull)
		if stop {
			return 0, nil
		}
		if err != nil || code != 0 {
			return s.abort(code, err)
		}
	}

	if spec.ExecEnvFile != "" {
		if err := writeExecEnv(spec.ExecEnvFile, mainEnv); err != nil {
			fmt.Fprintf(o.Messages, "airlock: warning: %v\n", err)
		}
		defer os.Remove(spec.ExecEnvFile)
	}
	if len(spec.Main.Argv) == 0 {
		// An idle sandbox (airlock up): no main command; run until stopped.
		s.status.emit(StatusEvent{Kind: KindSupervisorReady})
		code := s.idle(sigs)
		s.stopAll()
		s.collect()
		return code, nil
	}

	return s.runMain(o, r, mainEnv, stdin, sigs)
}

// loadStart reads what a start needs before anything else: the secrets file
// (read and deleted first, so that it never outlives the start) and the spec,
// and, for a spec that waits for values (held, parked, or with secrets on its
// socket), the values or the listener of the claims. secretsErr is a failure
// to get the values, reported once the status stream is open; err ends the
// start at once.
func loadStart(o Options) (spec *Spec, secrets *Secrets, claims *deliveryListener, secretsErr, err error) {
	// Read (and delete) the secrets file before anything else can fail, so
	// it never outlives the start.
	secrets, warn, secretsErr := LoadSecrets(o.SecretsPath)
	if warn != nil {
		fmt.Fprintf(o.Messages, "airlock: warning: %v\n", warn)
	}
	if o.SpecJSON != "" {
		spec, err = ParseSpec([]byte(o.SpecJSON))
	} else {
		spec, err = LoadSpec(o.SpecPath)
	}
	if err != nil {
		return nil, nil, nil, nil, err
	}
	// claims: of a parked spec, listening from the start.
	switch {
	case spec.Park && o.SecretsPath != "":
		secretsErr = errors.New("cannot use a secrets file with a parked spec: its claim delivers the values")
	case spec.Park && spec.ClaimStdin:
		// The claim comes on stdin (parkStdin), after the hold's release.
		if spec.Hold {
			var release *Secrets
			release, secretsErr = ReceiveSecrets(spec.SecretsSocket, spec.deliveryWait())
			release.forget()
		}
	case spec.Park:
		if claims, secretsErr = listenDelivery(spec.SecretsSocket); claims != nil {
			if spec.Hold { // the release first, the claim after it
				var release *Secrets
				release, secretsErr = claims.take(spec.deliveryWait(), nil)
				release.forget()
			}
		}
	case o.SecretsPath == "" && spec.SecretsSocket != "" && spec.NeedsSecrets():
		secrets, secretsErr = ReceiveSecrets(spec.SecretsSocket, spec.deliveryWait())
	}
	return spec, secrets, claims, secretsErr, nil
}

// claimed parks a started pooled sandbox until its claim, then starts the
// daemons that waited for the claim's values: the main command's environment
// and stdin. stop: the sandbox was stopped while parked (its daemons are
// stopped and collected); a non-zero code or an error aborts the start.
func (s *supervisor) claimed(o Options, claims *deliveryListener, sigs <-chan os.Signal, static map[string]bool, readyResults chan readyResult, devnull *os.File) (mainEnv []string, stdin *os.File, stop bool, code int, err error) {
	spec := s.spec
	stdin = o.Stdin
	var claim *Claim
	var values *Secrets
	if spec.ClaimStdin {
		claim, values, stop, err = s.parkStdin(o.Stdin, sigs)
	} else {
		claim, values, stop, err = s.park(claims, sigs)
	}
	if stop {
		s.stopAll()
		s.collect()
		return nil, nil, true, 0, nil
	}
	if err != nil {
		return nil, nil, false, ExitAirlock, err
	}
	claim.apply(spec)
	s.quiet = s.quiet || claim.Quiet
	if !claim.Stdin {
		stdin = devnull
	}
	rest := s.daemonsWhere(static, false)
	mainEnv, err = s.resolve(rest, values)
	values.forget() // every process env is resolved; drop the values
	if err != nil {
		return nil, nil, false, ExitAirlock, err
	}
	s.start(rest)
	if code, err := s.awaitReady(rest, readyResults, sigs); err != nil || code != 0 {
		return nil, nil, false, code, err
	}
	return mainEnv, stdin, false, 0, nil
}

// runMain starts the main command, waits for its end (forwarding signals),
// reports it, stops the daemons and, with an end marker, marks the end as
// soon as the output is out (sealed when nothing else runs).
func (s *supervisor) runMain(o Options, r *reaper, mainEnv []string, stdin *os.File, sigs <-chan os.Signal) (int, error) {
	spec := s.spec
	m, err := startMain(r, &spec.Main, s.mainCred, mainEnv, stdin, o.Stdout, o.Stderr)
	if err != nil {
		s.status.emit(StatusEvent{Kind: KindSupervisorFailed, Reason: err.Error()})
		s.stopAll()
		s.collect()
		var me *mainStartError
		if errors.As(err, &me) {
			return me.code, me.err
		}
		return ExitAirlock, err
	}
	s.status.emit(StatusEvent{Kind: KindSupervisorReady, PID: m.pid})
	st := s.awaitMain(m, sigs)
	ev := StatusEvent{Kind: KindMainExited, PID: m.pid, ExitCode: ptr(st.shellCode())}
	if st.signaled() {
		ev.Signal = signalName(st.signal)
	}
	s.status.emit(ev)
	s.stopAll()
	m.reclaimTerminal()
	if spec.EndMarker != "" {
		// The lines of the daemons that stop at once; when some are slower,
		// the end of the output: they finish after it. When all stopped, as
		// PID 1 it ends every other process of the sandbox (what the main
		// command left behind, execs) and marks a sealed end: nothing in the
		// sandbox runs any more, while the container's exit would reach the
		// host only after the Engine tore it down (~0.2 s). Otherwise the
		// container's exit ends the run, as without a marker.
		s.collectFor(fastEndWait)
		switch {
		case len(s.remaining) > 0:
			s.markEnd(o, spec.EndMarker, st.shellCode(), false, nil)
		case o.Seal && sealSandbox(sealWait):
			// Nothing else runs: the status stream is final, and goes with
			// the marker (the host then reads nothing from the container).
			s.markEnd(o, spec.EndMarker, st.shellCode(), true, s.status.finish())
		}
	}
	s.collect()
	return st.shellCode(), nil
}

func (o *Options) defaults() {
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Messages == nil {
		o.Messages = o.Stderr
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	if o.BackoffUnit <= 0 {
		o.BackoffUnit = time.Second
	}
	if o.ResetAfter <= 0 {
		o.ResetAfter = DefaultResetAfter
	}
}

// abort ends a start that failed (err, reported as supervisor.failed) or was
// interrupted (err nil): it stops the daemons started and returns code and err.
func (s *supervisor) abort(code int, err error) (int, error) {
	if err != nil {
		s.status.emit(StatusEvent{Kind: KindSupervisorFailed, Reason: err.Error()})
	}
	s.stopAll()
	s.collect()
	return code, err
}

// start launches the daemons ds (each waits for its after daemons itself).
func (s *supervisor) start(ds []*daemonRun) {
	for _, d := range ds {
		s.running = append(s.running, d)
		go d.run()
	}
}

// daemonsWhere returns the daemons whose name is in static (want true) or is not
// (want false), in spec order.
func (s *supervisor) daemonsWhere(static map[string]bool, want bool) []*daemonRun {
	var out []*daemonRun
	for _, d := range s.daemons {
		if static[d.spec.Name] == want {
			out = append(out, d)
		}
	}
	return out
}

// resolve resolves, with a claim's values, the env of the main command and
// of the daemons ds that waited for them, and returns the main command's.
func (s *supervisor) resolve(ds []*daemonRun, values *Secrets) ([]string, error) {
	mainEnv, err := resolveEnv("the main command", s.mainBase, s.spec.Main.Env, values)
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		env, err := resolveEnv("daemon "+d.spec.Name, d.base, d.spec.Env, values)
		if err != nil {
			return nil, err
		}
		d.env, d.base = prependPath(env, s.spec.PathPrepend), nil
	}
	return prependPath(mainEnv, s.spec.PathPrepend), nil
}

// prepare resolves the env of the main command and of each daemon, and
// opens the daemons' logs. With static (a parked spec), only the static
// daemons' env is resolved: the main command's and the others' wait for the
// claim's values (resolve), and the main env returned is nil.
func (s *supervisor) prepare(o Options, r *reaper, devnull *os.File, secrets *Secrets, secretsErr error, readyResults chan readyResult, static map[string]bool) ([]string, error) {
	if secretsErr != nil {
		return nil, secretsErr
	}
	// Every user is resolved first: one that does not exist fails the start
	// before a daemon or the main command runs.
	mainAcct, err := lookupAccount("the main command", s.spec.Main.User)
	if err != nil {
		return nil, err
	}
	accts := make([]*Account, len(s.spec.Daemons))
	for i, ds := range s.spec.Daemons {
		if accts[i], err = lookupAccount("daemon "+ds.Name, ds.User); err != nil {
			return nil, err
		}
	}
	s.mainCred = mainAcct.credential()
	var mainEnv []string
	if s.spec.Park {
		s.mainBase = withHome(o.Environ, mainAcct)
	} else {
		env, err := resolveEnv("the main command", withHome(o.Environ, mainAcct), s.spec.Main.Env, secrets)
		if err != nil {
			return nil, err
		}
		mainEnv = prependPath(env, s.spec.PathPrepend)
	}
	byName := map[string]*daemonRun{}
	for i, ds := range s.spec.Daemons {
		var env, base []string
		if s.spec.Park && !static[ds.Name] {
			base = withHome(o.Environ, accts[i])
		} else {
			e, err := resolveEnv("daemon "+ds.Name, withHome(o.Environ, accts[i]), ds.Env, secrets)
			if err != nil {
				return nil, err
			}
			env = prependPath(e, s.spec.PathPrepend)
		}
		sig, _ := signalByName(ds.Signal)
		ctx, cancel := context.WithCancel(context.Background())
		d := &daemonRun{
			spec: ds, env: env, base: base, sig: sig, cred: accts[i].credential(),
			timeout: time.Duration(*ds.Timeout) * time.Second,
			unit:    o.BackoffUnit,
			reset:   o.ResetAfter,
			devnull: devnull, r: r, status: s.status,
			ctx: ctx, cancel: cancel,
			started:      make(chan struct{}),
			ready:        make(chan struct{}),
			finished:     make(chan struct{}),
			readyResults: readyResults,
			results:      s.results,
		}
		s.daemons = append(s.daemons, d)
		byName[ds.Name] = d
		if err := d.openLogs(s.spec.LogDir); err != nil {
			return nil, err
		}
	}
	for _, d := range s.daemons {
		for _, a := range d.spec.After {
			d.deps = append(d.deps, byName[a])
		}
	}
	return mainEnv, nil
}

// awaitReady waits until the first launch of every daemon of ds was
// attempted (they start in after order, so this follows the ready checks
// they wait for), every one with a ready check passed it and every one-shot
// completed. A failed check or one-shot gives 125 and its error; a
// terminating signal gives 128+N.
func (s *supervisor) awaitReady(ds []*daemonRun, results <-chan readyResult, sigs <-chan os.Signal) (int, error) {
	pending := 0
	unstarted := make([]<-chan struct{}, 0, len(ds))
	for _, d := range ds {
		if d.spec.Ready != nil || d.spec.Oneshot {
			pending++
		}
		unstarted = append(unstarted, d.started)
	}
	for pending > 0 || len(unstarted) > 0 {
		var started <-chan struct{} // nil (never ready) once all started
		if len(unstarted) > 0 {
			started = unstarted[0]
		}
		select {
		case <-started:
			unstarted = unstarted[1:]
		case r := <-results:
			if r.err != nil {
				return ExitAirlock, r.err
			}
			pending--
		case sig := <-sigs:
			if terminatingSignals[sig] {
				if !s.quiet {
					fmt.Fprintf(s.msgs, "airlock: interrupted during setup (%s while the daemons were getting ready); the main command did not start\n", signalName(sig.(unix.Signal)))
				}
				return 128 + int(sig.(unix.Signal)), nil
			}
		}
	}
	return 0, nil
}

// idle waits for a terminating signal (docker stop sends SIGTERM) and returns
// the exit code of an orderly stop: 0.
func (s *supervisor) idle(sigs <-chan os.Signal) int {
	for sig := range sigs {
		if terminatingSignals[sig] {
			return 0
		}
	}
	return 0
}

// awaitMain forwards signals to the main command until it exits.
func (s *supervisor) awaitMain(m *mainProc, sigs <-chan os.Signal) exitStatus {
	for {
		select {
		case ws := <-m.ch:
			return fromWaitStatus(ws)
		case sig := <-sigs:
			m.forward(sig)
		}
	}
}

func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	return isTermios(int(f.Fd()))
}
