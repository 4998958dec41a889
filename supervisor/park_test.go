package supervisor

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parked makes the sandbox a pooled one: park, a socket for the claim, no
// main command in the spec.
func (s *sandbox) parked() {
	s.spec.Park = true
	s.spec.SecretsSocket = s.path("secrets.sock")
	s.spec.Main.Argv = nil
}

// claim delivers c and values to the parked supervisor and returns its
// refusal, if any.
func (s *sandbox) claim(c Claim, values map[string]string) error {
	s.t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		s.t.Fatal(err)
	}
	all := map[string]string{ClaimKey: string(b)}
	for k, v := range values {
		all[k] = v
	}
	return s.deliver(all)
}

// deliver delivers a raw object of values to the supervisor's socket.
func (s *sandbox) deliver(values map[string]string) error {
	s.t.Helper()
	b, err := json.Marshal(values)
	if err != nil {
		s.t.Fatal(err)
	}
	return Deliver(s.spec.SecretsSocket, strings.NewReader(string(b)), 10*time.Second)
}

// waitParked waits for supervisor.parked.
func (s *sandbox) waitParked() {
	s.t.Helper()
	s.waitEvent("supervisor.parked", func(e StatusEvent) bool { return e.Kind == KindSupervisorParked })
}

// kindIndex is the index of the first event of daemon ("" for any) and kind,
// or -1.
func kindIndex(evs []StatusEvent, daemon, kind string) int {
	return slices.IndexFunc(evs, func(e StatusEvent) bool {
		return e.Kind == kind && (daemon == "" || e.Daemon == daemon)
	})
}

// TestParkedClaim: a parked supervisor starts its static daemon and reports
// parked once it is ready, starts no main command until the claim, then runs
// the claim's command with its cwd, its env (a literal and a value delivered
// by key) and quiet; the command's exit code is the run's.
func TestParkedClaim(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.parked()
	s.spec.Main.Env = []EnvEntry{literal("FROM_SPEC", "spec")}
	db := s.daemon("db", sh(fmt.Sprintf("echo up > %q; exec sleep 100", s.path("db.up"))))
	db.Ready = &Ready{Cmd: []string{"test", "-s", s.path("db.up")}, Timeout: "20s"}
	s.start()
	s.waitParked()
	evs := s.events()
	ready, parked := kindIndex(evs, "db", KindDaemonReady), kindIndex(evs, "", KindSupervisorParked)
	if ready < 0 || ready > parked {
		t.Fatalf("daemon.ready of db at %d, supervisor.parked at %d: %+v", ready, parked, evs)
	}
	if i := kindIndex(evs, "", KindSupervisorReady); i >= 0 {
		t.Fatalf("supervisor.ready before the claim: %+v", evs)
	}
	work := s.path("work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	err := s.claim(Claim{
		Argv:  sh(fmt.Sprintf(`echo "$(pwd) $FROM_SPEC $LIT $SEC" > %q; exit 7`, s.path("main.out"))),
		Cwd:   work,
		Env:   []EnvEntry{literal("LIT", "lit"), {Name: "SEC", Secret: "run.env.SEC"}},
		Quiet: true,
	}, map[string]string{"run.env.SEC": mainSecret})
	if err != nil {
		t.Fatal(err)
	}
	r := s.wait()
	if r.code != 7 {
		t.Fatalf("exit %d, want 7; stderr:\n%s", r.code, r.stderr)
	}
	if got, want := strings.TrimSpace(s.read("main.out")), work+" spec lit "+mainSecret; got != want {
		t.Errorf("the main command saw %q, want %q", got, want)
	}
	if strings.Contains(r.stderr, "daemon db") {
		t.Errorf("a quiet claim printed shutdown lines:\n%s", r.stderr)
	}
	evs = s.events()
	parked, sready := kindIndex(evs, "", KindSupervisorParked), kindIndex(evs, "", KindSupervisorReady)
	if sready < parked || evs[sready].PID == 0 {
		t.Errorf("supervisor.ready at %d (after parked at %d, with the main pid): %+v", sready, parked, evs)
	}
	if got := filter(evs, "db", KindDaemonStarted); len(got) != 1 {
		t.Errorf("db started %d times, want once", len(got))
	}
	if i := kindIndex(evs, "", KindMainExited); i < 0 || *evs[i].ExitCode != 7 {
		t.Errorf("main.exited: %+v", evs)
	}
	assertNoSecrets(t, s, r)
}

// TestParkedSecretDaemon: a daemon whose env takes a delivered value, and one
// after it, start only after the claim, with the value; the main command waits
// for their readiness. A static daemon runs before the claim.
func TestParkedSecretDaemon(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.parked()
	s.daemon("static", sh("exec sleep 100"))
	sec := s.daemon("sec", sh(fmt.Sprintf(`sleep 0.2; echo "$PASSWORD" > %q; exec sleep 100`, s.path("sec.out"))))
	sec.Env = []EnvEntry{{Name: "PASSWORD", Secret: "daemons.sec.env.PASSWORD"}}
	sec.Ready = &Ready{Cmd: []string{"test", "-s", s.path("sec.out")}, Timeout: "20s"}
	after := s.daemon("after", sh(fmt.Sprintf(`echo started > %q; exec sleep 100`, s.path("after.out"))))
	after.After = []string{"sec"}
	after.Ready = &Ready{Cmd: []string{"test", "-s", s.path("after.out")}, Timeout: "20s"}
	s.start()
	s.waitParked()
	evs := s.events()
	if kindIndex(evs, "static", KindDaemonStarted) < 0 {
		t.Errorf("the static daemon did not start before the claim: %+v", evs)
	}
	for _, name := range []string{"sec", "after"} {
		if i := kindIndex(evs, name, KindDaemonStarted); i >= 0 {
			t.Errorf("daemon %s started before the claim: %+v", name, evs)
		}
	}
	err := s.claim(Claim{Argv: sh(fmt.Sprintf("cat %q %q > %q", s.path("sec.out"), s.path("after.out"), s.path("main.out")))},
		map[string]string{"daemons.sec.env.PASSWORD": daemonSecret})
	if err != nil {
		t.Fatal(err)
	}
	r := s.wait()
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if got, want := s.read("main.out"), daemonSecret+"\nstarted\n"; got != want {
		t.Errorf("the main command read %q, want %q", got, want)
	}
	evs = s.events()
	parked := kindIndex(evs, "", KindSupervisorParked)
	secReady, afterStarted := kindIndex(evs, "sec", KindDaemonReady), kindIndex(evs, "after", KindDaemonStarted)
	afterReady, sready := kindIndex(evs, "after", KindDaemonReady), kindIndex(evs, "", KindSupervisorReady)
	if !(parked < secReady && secReady < afterStarted && afterReady < sready) {
		t.Errorf("order: parked %d, sec ready %d, after started %d, after ready %d, supervisor.ready %d",
			parked, secReady, afterStarted, afterReady, sready)
	}
	assertNoSecrets(t, s, r)
}

// TestParkedStdin: the claim says whether the main command reads the
// supervisor's stdin or /dev/null.
func TestParkedStdin(t *testing.T) {
	t.Parallel()
	for _, stdin := range []bool{false, true} {
		t.Run(fmt.Sprint(stdin), func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			s.parked()
			s.stdin = s.path("in.txt")
			if err := os.WriteFile(s.stdin, []byte("hello\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s.start()
			s.waitParked()
			if err := s.claim(Claim{Argv: sh(fmt.Sprintf("cat > %q", s.path("got"))), Stdin: stdin}, nil); err != nil {
				t.Fatal(err)
			}
			if r := s.wait(); r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			want := ""
			if stdin {
				want = "hello\n"
			}
			if got := s.read("got"); got != want {
				t.Errorf("the main command read %q, want %q", got, want)
			}
		})
	}
}

// TestParkedClaimRefused: a delivery without a valid claim is refused; once a
// static daemon is down for good (given up, or exited and not restarted), a
// valid claim is refused as unhealthy, again and again, and the supervisor
// stays parked until SIGTERM, which ends it with 0.
func TestParkedClaimRefused(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.parked()
	die := s.path("DIE")
	db := s.daemon("db", sh(fmt.Sprintf("while [ ! -e %q ]; do sleep 0.01; done; exit 1", die)))
	db.MaxRestarts = ptr(1)
	s.daemon("web", sh(fmt.Sprintf("while [ ! -e %q ]; do sleep 0.01; done; exit 0", die)))
	s.start()
	s.waitParked()
	for _, c := range []struct {
		values map[string]string
		want   string
	}{
		{map[string]string{"env.X": "x"}, `cannot use the delivery: it holds no "airlock.claim"`},
		{map[string]string{ClaimKey: "[1]"}, "cannot decode the claim"},
		{map[string]string{ClaimKey: `{"argv":[]}`}, "cannot use the claim: argv is empty"},
		{map[string]string{ClaimKey: `{"argv":["true"],"end_marker":"a-b"}`}, "cannot use the claim: end_marker"},
		{map[string]string{ClaimKey: `{"argv":["true"],"cwd":"rel"}`}, "cannot use the claim: cwd"},
		{map[string]string{ClaimKey: `{"argv":["true"],"env":[{"name":"A"}]}`}, "cannot use the claim: env.A needs exactly one of value or secret"},
		{map[string]string{ClaimKey: `{"argv":["true"],"bogus":1}`}, `unknown field "bogus"`},
	} {
		err := s.deliver(c.values)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("delivery %v: got %v, want a refusal with %q", c.values, err, c.want)
		}
	}
	if err := os.WriteFile(die, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.waitEvent("db's gave_up", func(e StatusEvent) bool { return e.Kind == KindDaemonGaveUp && e.Daemon == "db" })
	s.waitEvent("web's exit", func(e StatusEvent) bool { return e.Kind == KindDaemonExited && e.Daemon == "web" })
	want := "unhealthy: daemon db gave up after 2 launches (exit 1); daemon web exited (code 0)"
	for i := 0; i < 2; i++ {
		err := s.claim(Claim{Argv: sh("echo ran > " + s.path("ran"))}, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("claim %d: got %v, want a refusal with %q", i+1, err, want)
		}
	}
	s.signal(syscall.SIGTERM)
	r := s.wait()
	if r.code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(s.path("ran")); !os.IsNotExist(err) {
		t.Errorf("the refused claim's command ran (%v)", err)
	}
	if i := kindIndex(s.events(), "", KindSupervisorReady); i >= 0 {
		t.Errorf("supervisor.ready without an accepted claim")
	}
}

// TestParkedSIGTERM: SIGTERM while parked stops the static daemons and ends
// the run with 0; a daemon that waits for values never starts.
func TestParkedSIGTERM(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.parked()
	s.daemon("db", sh("exec sleep 100"))
	sec := s.daemon("sec", sh("exec sleep 100"))
	sec.Env = []EnvEntry{{Name: "P", Secret: "daemons.sec.env.P"}}
	s.start()
	s.waitParked()
	s.signal(syscall.SIGTERM)
	r := s.wait()
	if r.code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	evs := s.events()
	if kindIndex(evs, "db", KindDaemonStopped) < 0 {
		t.Errorf("no daemon.stopped for db: %+v", evs)
	}
	if i := slices.IndexFunc(evs, func(e StatusEvent) bool { return e.Daemon == "sec" }); i >= 0 {
		t.Errorf("an event of the daemon that waits for values: %+v", evs[i])
	}
	if !strings.Contains(r.stderr, "daemon db: shut down") || strings.Contains(r.stderr, "daemon sec") {
		t.Errorf("shutdown lines:\n%s", r.stderr)
	}
	if _, err := os.Stat(s.spec.SecretsSocket); !os.IsNotExist(err) {
		t.Errorf("the socket is still there (%v)", err)
	}
}

// TestParkedFailures: a static one-shot that fails fails the start before
// parking (125, supervisor.failed); a value the claim lacks fails the run
// after it, naming the key; a secrets file fails the start.
func TestParkedFailures(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.parked()
	setup := s.daemon("setup", sh("exit 3"))
	setup.Oneshot, setup.Restart, setup.MaxRestarts = true, "", nil
	r := s.run()
	if r.code != 125 || !strings.Contains(r.stderr, "daemon setup (oneshot) failed") {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	evs := s.events()
	if kindIndex(evs, "", KindSupervisorFailed) < 0 || kindIndex(evs, "", KindSupervisorParked) >= 0 {
		t.Errorf("events: %+v", evs)
	}

	s = newSandbox(t)
	s.parked()
	s.start()
	s.waitParked()
	if err := s.claim(Claim{Argv: []string{"true"}, Env: []EnvEntry{{Name: "T", Secret: "run.env.T"}}}, nil); err != nil {
		t.Fatal(err)
	}
	r = s.wait()
	if r.code != 125 || !strings.Contains(r.stderr, `secret "run.env.T" is not in the secrets file`) {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}

	s = newSandbox(t) // the claim brings the values: a secrets file is refused
	s.parked()
	s.secrets = map[string]string{"env.T": mainSecret}
	r = s.run()
	if r.code != 125 || !strings.Contains(r.stderr, "cannot use a secrets file with a parked spec") {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(s.path("secrets.json")); !os.IsNotExist(err) {
		t.Errorf("the secrets file is still there: %v", err)
	}
}

// TestParkNeedsSocket: park without a socket for the claim is refused, and a
// parked spec waits for a delivery.
func TestParkNeedsSocket(t *testing.T) {
	_, err := ParseSpec([]byte(`{"version":1,"park":true,"main":{"argv":[]}}`))
	if err == nil || !strings.Contains(err.Error(), "park needs secrets_socket") {
		t.Fatalf("want a refusal naming secrets_socket, got %v", err)
	}
	_, err = ParseSpec([]byte(`{"version":1,"park":true,"hold":true,"hold_timeout":-1,"secrets_socket":"/run/s.sock","main":{"argv":[]}}`))
	if err == nil || !strings.Contains(err.Error(), "hold_timeout must be 0 to") {
		t.Fatalf("want a refusal of a negative hold_timeout, got %v", err)
	}
	s, err := ParseSpec([]byte(`{"version":1,"park":true,"secrets_socket":"/run/s.sock","main":{"argv":[]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !s.NeedsSecrets() {
		t.Error("a parked spec: NeedsSecrets() is false, want true")
	}
}

// TestStaticDaemons: a daemon is static when no env entry of its own takes a
// value and every daemon it comes after is static.
func TestStaticDaemons(t *testing.T) {
	sec := []EnvEntry{{Name: "P", Secret: "k"}}
	spec := &Spec{Daemons: []*Daemon{
		{Name: "a"},
		{Name: "b", Env: sec},
		{Name: "c", After: []string{"a"}},
		{Name: "d", After: []string{"e"}},
		{Name: "e", After: []string{"b"}, Env: []EnvEntry{literal("X", "1")}},
	}}
	got := spec.staticDaemons()
	want := map[string]bool{"a": true, "c": true}
	if len(got) != len(want) {
		t.Fatalf("static %v, want %v", got, want)
	}
	for n := range want {
		if !got[n] {
			t.Errorf("static %v, want %v", got, want)
		}
	}
}

// TestParkedClaimOnStdin (ClaimStdin): the claim is the first line of stdin,
// values included; what follows it is the main command's stdin. A bad claim,
// or a stream that ends before one, ends the run with 125 and says why.
func TestParkedClaimOnStdin(t *testing.T) {
	t.Parallel()
	claimLine := func(c Claim, values map[string]string) string {
		b, _ := json.Marshal(c)
		all := map[string]string{ClaimKey: string(b)}
		for k, v := range values {
			all[k] = v
		}
		line, _ := json.Marshal(all)
		return string(line) + "\n"
	}
	cases := []struct {
		name, stdin string
		code        int
		got, stderr string
	}{
		{"claim then stdin", claimLine(Claim{Argv: sh("echo $TOKEN > " + "OUT.tok; cat > OUT"), Stdin: true,
			Env: []EnvEntry{{Name: "TOKEN", Secret: "run.env.TOKEN"}}}, map[string]string{"run.env.TOKEN": "s3cret"}) + "hello\n", 0, "hello\n", ""},
		{"no argv", claimLine(Claim{}, nil), ExitAirlock, "", "argv is empty"},
		{"no claim", "", ExitAirlock, "", "its stream ended before it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			s.parked()
			s.spec.ClaimStdin = true
			s.stdin = s.path("in.txt")
			stdin := strings.ReplaceAll(c.stdin, "OUT", s.path("got"))
			if err := os.WriteFile(s.stdin, []byte(stdin), 0o644); err != nil {
				t.Fatal(err)
			}
			s.start()
			r := s.wait()
			if r.code != c.code || !strings.Contains(r.stderr, c.stderr) {
				t.Fatalf("exit %d, want %d with %q; stderr:\n%s", r.code, c.code, c.stderr, r.stderr)
			}
			if c.code != 0 {
				return
			}
			if got := s.read("got"); got != c.got {
				t.Errorf("the main command read %q, want %q", got, c.got)
			}
			if got := s.read("got.tok"); got != "s3cret\n" {
				t.Errorf("the main command's TOKEN is %q, want the claim's value", got)
			}
		})
	}
}

// TestParkedHeld: a parked spec that also holds (the runtime starts the
// services that share the sandbox's network namespace after the container)
// starts nothing until the release, then its static daemon, parks, and takes
// the claim as usual: on the socket, or on stdin.
func TestParkedHeld(t *testing.T) {
	t.Parallel()
	for _, onStdin := range []bool{false, true} {
		t.Run(fmt.Sprintf("claim on stdin %v", onStdin), func(t *testing.T) {
			t.Parallel()
			s := newSandbox(t)
			s.parked()
			s.spec.Hold = true
			s.spec.HoldTimeout = 30
			claim := Claim{Argv: sh("echo claimed > " + s.path("main.out"))}
			if onStdin {
				s.spec.ClaimStdin = true
				b, _ := json.Marshal(claim)
				line, _ := json.Marshal(map[string]string{ClaimKey: string(b)})
				s.stdin = s.path("in.txt")
				if err := os.WriteFile(s.stdin, append(line, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			db := s.daemon("db", sh(fmt.Sprintf("echo up > %q; exec sleep 100", s.path("db.up"))))
			db.Ready = &Ready{Cmd: []string{"test", "-s", s.path("db.up")}, Timeout: "20s"}
			s.start()
			s.waitFor("the socket", func() bool {
				_, err := os.Stat(s.spec.SecretsSocket)
				return err == nil
			})
			if _, err := os.Stat(s.path("db.up")); !os.IsNotExist(err) {
				t.Fatalf("the daemon started before the release (%v)", err)
			}
			if err := s.deliver(map[string]string{}); err != nil {
				t.Fatal(err)
			}
			if !onStdin {
				s.waitParked()
				if err := s.claim(claim, nil); err != nil {
					t.Fatal(err)
				}
			}
			r := s.wait()
			if r.code != 0 || s.read("main.out") != "claimed\n" {
				t.Fatalf("exit %d, main.out %q; stderr:\n%s", r.code, s.read("main.out"), r.stderr)
			}
			if s.read("db.up") != "up\n" {
				t.Errorf("the static daemon did not run")
			}
		})
	}
}
