package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/test/testenv"
)

// airlockBin is the real binary, built once by TestMain; the integration
// tests run `airlock supervise --spec …` as a subprocess.
var airlockBin string

// raceEnabled is set by race_test.go under -race.
var raceEnabled bool

// helperEnv selects a helper mode of the test binary (see helpers_test.go).
const helperEnv = "SUPERVISOR_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.fuzzworker") {
			os.Exit(m.Run()) // a fuzzing worker runs FuzzReadStatus only
		}
	}
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "supervisor-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" {
		fmt.Fprintln(os.Stderr, "cannot find the module root:", err)
		return 1
	}
	airlockBin = filepath.Join(dir, "airlock")
	build := exec.Command("go", "build", "-trimpath", "-o", airlockBin, "./cmd/airlock")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if raceEnabled {
		build = exec.Command("go", "build", "-race", "-trimpath", "-o", airlockBin, "./cmd/airlock")
		build.Env = append(os.Environ(), "CGO_ENABLED=1")
	}
	build.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "cannot build airlock:", err)
		return 1
	}
	return testenv.RunClean(m)
}

// sandbox is one supervisor run under test: a temp dir with the spec, logs,
// status stream and the supervisor's stdout/stderr files.
type sandbox struct {
	t    *testing.T
	dir  string
	spec Spec
	// unit is passed as --backoff-unit (0: the real one second).
	unit    time.Duration
	reset   time.Duration // --reset-after, when set
	env     []string      // the supervisor's environment (nil: the test's)
	args    []string      // extra arguments before supervise
	secrets map[string]string
	stdin   string // a file for the supervisor's stdin ("": none)

	cmd     *exec.Cmd
	started time.Time
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	dir := t.TempDir()
	return &sandbox{
		t:    t,
		dir:  dir,
		unit: 10 * time.Millisecond,
		spec: Spec{
			Version:    1,
			LogDir:     filepath.Join(dir, "logs"),
			StatusFile: filepath.Join(dir, "status.jsonl"),
			Main:       Main{Argv: []string{"true"}},
		},
	}
}

// path returns a path inside the sandbox's dir.
func (s *sandbox) path(name string) string { return filepath.Join(s.dir, name) }

// sh is the argv of a /bin/sh script.
func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// helper is the argv of a helper mode of the test binary; its env entry must
// be added with helperEntry.
func helper(args ...string) []string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return append([]string{exe}, args...)
}

func helperEntry(mode string) EnvEntry { return EnvEntry{Name: helperEnv, Value: ptr(mode)} }

func literal(name, value string) EnvEntry { return EnvEntry{Name: name, Value: ptr(value)} }

// daemon adds a daemon with the given command and returns it for tuning.
func (s *sandbox) daemon(name string, command []string) *Daemon {
	d := &Daemon{Name: name, Command: command, Cwd: s.dir, Timeout: ptr(5), Restart: RestartOnFailure, MaxRestarts: ptr(0)}
	s.spec.Daemons = append(s.spec.Daemons, d)
	return d
}

// mainWaitsForStop makes the main command wait until the test calls stop: it
// reads a line from the FIFO STOP, which costs nothing while it waits (a loop
// that looked for a file forked a sleep every 10 ms for the whole test).
func (s *sandbox) mainWaitsForStop() {
	if err := unix.Mkfifo(s.path("STOP"), 0o666); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Chmod(s.path("STOP"), 0o666); err != nil { // whatever the umask
		s.t.Fatal(err)
	}
	s.spec.Main.Argv = sh(fmt.Sprintf("read -r line < %q", s.path("STOP")))
}

// stop ends the wait of mainWaitsForStop (a line into the FIFO; a file STOP
// when there is none).
func (s *sandbox) stop() {
	if fi, err := os.Lstat(s.path("STOP")); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
		// Opened read-write, the FIFO does not wait for the main command to
		// open its end, and holds the line until it reads it.
		f, err := os.OpenFile(s.path("STOP"), os.O_RDWR, 0)
		if err != nil {
			s.t.Fatal(err)
		}
		s.t.Cleanup(func() { f.Close() })
		if _, err := f.WriteString("stop\n"); err != nil {
			s.t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(s.path("STOP"), nil, 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// start writes the spec and starts the supervisor.
func (s *sandbox) start() {
	t := s.t
	t.Helper()
	data, err := json.MarshalIndent(&s.spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	specPath := s.path("spec.json")
	if err := os.WriteFile(specPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{}, s.args...), "supervise", "--spec", specPath)
	if s.unit > 0 {
		args = append(args, "--backoff-unit", s.unit.String())
	}
	if s.reset > 0 {
		args = append(args, "--reset-after", s.reset.String())
	}
	if s.secrets != nil {
		b, _ := json.Marshal(s.secrets)
		if err := os.WriteFile(s.path("secrets.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--secrets", s.path("secrets.json"))
	}
	s.cmd = exec.Command(airlockBin, args...)
	s.cmd.Env = s.env
	stdout, err := os.Create(s.path("out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(s.path("err.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	s.cmd.Stdout, s.cmd.Stderr = stdout, stderr
	if s.stdin != "" {
		in, err := os.Open(s.stdin)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		s.cmd.Stdin = in
	}
	s.started = time.Now()
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
}

// result is how a supervisor run ended.
type result struct {
	code    int
	stdout  string
	stderr  string
	elapsed time.Duration
}

// wait waits (at most 60 s) for the supervisor to exit.
func (s *sandbox) wait() result {
	t := s.t
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
		t.Fatalf("supervisor did not exit within 60s; stderr:\n%s", s.read("err.txt"))
	}
	r := result{
		code:    s.cmd.ProcessState.ExitCode(),
		stdout:  s.read("out.txt"),
		stderr:  s.read("err.txt"),
		elapsed: time.Since(s.started),
	}
	if strings.Contains(r.stderr, "WARNING: DATA RACE") {
		t.Errorf("the supervisor has a data race:\n%s", r.stderr)
	}
	return r
}

// run starts the supervisor and waits for it.
func (s *sandbox) run() result {
	s.t.Helper()
	s.start()
	return s.wait()
}

func (s *sandbox) read(name string) string {
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		s.t.Fatal(err)
	}
	return string(b)
}

// events reads the status stream.
func (s *sandbox) events() []StatusEvent {
	f, err := os.Open(s.spec.StatusFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	evs, err := ReadStatus(f)
	if err != nil {
		s.t.Fatal(err)
	}
	return evs
}

// waitFor polls cond (every 10 ms, at most 30 s).
func (s *sandbox) waitFor(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s; stderr:\n%s\nstatus:\n%s", what, s.read("err.txt"), s.read("status.jsonl"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitEvent waits for an event of the stream matching match.
// stopAfter waits for the first status event of kind, then stops the
// supervisor and returns the run's result.
func (s *sandbox) stopAfter(kind string) result {
	s.t.Helper()
	s.waitEvent(kind, func(e StatusEvent) bool { return e.Kind == kind })
	s.stop()
	return s.wait()
}

func (s *sandbox) waitEvent(what string, match func(StatusEvent) bool) StatusEvent {
	s.t.Helper()
	var found StatusEvent
	s.waitFor(what, func() bool {
		for _, e := range s.events() {
			if match(e) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

func (s *sandbox) signal(sig syscall.Signal) {
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
}

// kinds filters the events of one daemon ("" for all) and kind.
func filter(evs []StatusEvent, daemon, kind string) []StatusEvent {
	var out []StatusEvent
	for _, e := range evs {
		if (daemon == "" || e.Daemon == daemon) && e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func countLines(s string) int { return strings.Count(s, "\n") }

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// processGone reports whether pid has exited (gone or a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	st, _, ok := parseStat(string(b))
	return ok && (st == "Z" || st == "X")
}

// parseStat returns the state and parent pid of a /proc/<pid>/stat line.
func parseStat(s string) (state string, ppid int, ok bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return "", 0, false
	}
	if _, err := fmt.Sscan(f[1], &ppid); err != nil {
		return "", 0, false
	}
	return f[0], ppid, true
}
