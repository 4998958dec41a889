package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/supervisor"
)

// logsSandbox adds a ready sandbox s1 with daemons api and web and their logs:
// each stream's, and both in the order read (supervisor.OutputLog). web's
// stdout ends with a line not ended yet, which output.log does not hold yet.
func logsSandbox(t *testing.T, f *fakeDaemon) {
	t.Helper()
	f.add(client.Sandbox{ID: "s1", DaemonNames: []string{"api", "web"}})
	f.engine.writeFile("c-s1", supervisor.DaemonLogFile("api", false), "api 1\napi 2\napi 3\n")
	f.engine.writeFile("c-s1", supervisor.DaemonLogFile("api", true), "api err 1\n")
	f.engine.writeFile("c-s1", supervisor.DaemonOutputLog("api"), "o api 1\ne api err 1\no api 2\no api 3\n")
	f.engine.writeFile("c-s1", supervisor.DaemonLogFile("web", false), "web 1\nweb 2\nno newline")
	f.engine.writeFile("c-s1", supervisor.DaemonLogFile("web", true), "web err 1\nweb err 2\n")
	f.engine.writeFile("c-s1", supervisor.DaemonOutputLog("web"), "o web 1\ne web err 1\no web 2\ne web err 2\n")
}

// sortedLines: the daemons' logs are read at the same time, so only each line is whole.
func sortedLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(lines)
	return lines
}

// logs prints both streams of every daemon: stdout lines on stdout, stderr
// lines on stderr, each prefixed with the daemon's name.
func TestLogsEveryDaemonPrefixed(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	logsSandbox(t, f)
	r := f.run("logs", "s1")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	want := []string{"api | api 1", "api | api 2", "api | api 3", "web | web 1", "web | web 2"}
	if got := sortedLines(r.stdout); !slices.Equal(got, want) || !strings.HasSuffix(r.stdout, "\n") {
		t.Errorf("logs s1, stdout:\n%s\nwant the lines %q", r.stdout, want)
	}
	wantErr := []string{"api | api err 1", "web | web err 1", "web | web err 2"}
	if got := sortedLines(r.stderr); !slices.Equal(got, wantErr) {
		t.Errorf("logs s1, stderr:\n%s\nwant the lines %q", r.stderr, wantErr)
	}
	// Both read from the running sandbox by an exec of supervise tail, which
	// cuts long lines there (a record's tag aside).
	var read []string
	for _, x := range f.engine.createdExecs() {
		if i := slices.Index(x.Cmd, "--max-line"); i < 0 || x.Cmd[i+1] != "65538" {
			t.Errorf("tail exec %q does not cut long lines at 64 KiB and a tag", x.Cmd)
		}
		read = append(read, x.Cmd[len(x.Cmd)-1])
	}
	slices.Sort(read)
	if want := []string{supervisor.DaemonOutputLog("api"), supervisor.DaemonOutputLog("web")}; !slices.Equal(read, want) {
		t.Errorf("files read %q, want %q", read, want)
	}
	// With --stdout or --stderr, one stream: still stdout on stdout, stderr on stderr.
	r = f.run("logs", "--stdout", "s1")
	if want := []string{"api | api 1", "api | api 2", "api | api 3", "web | no newline", "web | web 1", "web | web 2"}; r.code != 0 || !slices.Equal(sortedLines(r.stdout), want) || r.stderr != "" {
		t.Errorf("logs --stdout s1: exit %d, stdout:\n%s\nstderr %q; want the lines %q", r.code, r.stdout, r.stderr, want)
	}
	r = f.run("logs", "--stderr", "s1")
	if r.code != 0 || r.stdout != "" || !slices.Equal(sortedLines(r.stderr), wantErr) {
		t.Errorf("logs --stderr s1: exit %d, stdout %q, stderr:\n%s\nwant the lines %q", r.code, r.stdout, r.stderr, wantErr)
	}
}

func TestLogsOneDaemonTailAndStreams(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	logsSandbox(t, f)
	for _, c := range []struct {
		args           []string
		stdout, stderr string
	}{
		{[]string{"logs", "s1", "api"}, "api 1\napi 2\napi 3\n", "api err 1\n"},
		{[]string{"logs", "s1", "web"}, "web 1\nweb 2\n", "web err 1\nweb err 2\n"},
		// --tail counts the lines shown, of both streams.
		{[]string{"logs", "--tail", "2", "s1", "api"}, "api 2\napi 3\n", ""},
		{[]string{"logs", "-n", "3", "s1", "web"}, "web 2\n", "web err 1\nweb err 2\n"},
		{[]string{"logs", "-n", "0", "s1", "api"}, "", ""},
		{[]string{"logs", "--stdout", "s1", "web"}, "web 1\nweb 2\nno newline\n", ""},
		// A last line without a newline is one of the N, as for tail -n.
		{[]string{"logs", "--stdout", "-n", "2", "s1", "web"}, "web 2\nno newline\n", ""},
		{[]string{"logs", "--stderr", "s1", "web"}, "", "web err 1\nweb err 2\n"},
		{[]string{"logs", "--stderr", "-n", "1", "s1", "web"}, "", "web err 2\n"},
	} {
		r := f.run(c.args...)
		if r.code != 0 || r.stdout != c.stdout || r.stderr != c.stderr {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q, %q", c.args, r.code, r.stdout, r.stderr, c.stdout, c.stderr)
		}
	}
	r := f.run("logs", "-n", "2", "s1")
	if want := []string{"api | api 2", "api | api 3", "web | web 2"}; r.code != 0 || !slices.Equal(sortedLines(r.stdout), want) || r.stderr != "web | web err 2\n" {
		t.Errorf("logs -n 2 s1: exit %d, stdout:\n%s\nstderr %q; want the lines %q and web's last stderr line", r.code, r.stdout, r.stderr, want)
	}
}

// -n of a running sandbox reads the last lines in the sandbox (an exec of
// supervise tail --lines --max-line); a stopped one's log is read through the archive API,
// which cannot seek: once to find where the last lines start, once to print them.
func TestLogsTailRunningAndStopped(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	logsSandbox(t, f)
	f.add(client.Sandbox{ID: "st", State: client.StateStopped, DaemonNames: []string{"api"}})
	f.engine.writeFile("c-st", supervisor.DaemonOutputLog("api"), "o one\ne two\no three\ne four\n")
	file := supervisor.DaemonOutputLog("api")

	if r := f.run("logs", "-n", "2", "s1", "api"); r.code != 0 || r.stdout != "api 2\napi 3\n" || r.stderr != "" {
		t.Errorf("logs -n 2 of a running sandbox: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	execs := f.engine.createdExecs()
	if want := []string{backend.SupervisorIn, "supervise", "tail", "--max-line", "65538", "--lines", "2", "--", file}; len(execs) != 1 || !slices.Equal(execs[0].Cmd, want) {
		t.Errorf("execs %+v, want one of %q", execs, want)
	}
	if reqs := f.engine.requests("GET", "/containers/c-s1/archive"); len(reqs) != 0 {
		t.Errorf("the running sandbox's log was downloaded: %v", reqs)
	}

	if r := f.run("logs", "-n", "3", "st", "api"); r.code != 0 || r.stdout != "three\n" || r.stderr != "two\nfour\n" {
		t.Errorf("logs -n 3 of a stopped sandbox: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if reqs := f.engine.requests("GET", "/containers/c-st/archive"); len(reqs) != 2 {
		t.Errorf("the stopped sandbox's log was read %d times, want 2", len(reqs))
	}
}

// A sandbox whose supervisor kept no output.log (an older one) shows its
// stdout log for both streams, running or stopped, followed or not.
func TestLogsWithoutOutputLog(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "old", DaemonNames: []string{"db"}})
	f.engine.writeFile("c-old", supervisor.DaemonLogFile("db", false), "db 1\ndb 2\n")
	f.engine.writeFile("c-old", supervisor.DaemonLogFile("db", true), "db err\n")
	f.add(client.Sandbox{ID: "olds", State: client.StateStopped, DaemonNames: []string{"db"}})
	f.engine.writeFile("c-olds", supervisor.DaemonLogFile("db", false), "one\ntwo\nthree")

	for _, c := range []struct {
		args           []string
		stdout, stderr string
	}{
		{[]string{"logs", "old", "db"}, "db 1\ndb 2\n", ""},
		{[]string{"logs", "-n", "1", "old", "db"}, "db 2\n", ""},
		{[]string{"logs", "--stderr", "old", "db"}, "", "db err\n"},
		{[]string{"logs", "olds", "db"}, "one\ntwo\nthree\n", ""},
		{[]string{"logs", "-n", "2", "olds"}, "two\nthree\n", ""},
	} {
		r := f.run(c.args...)
		if r.code != 0 || r.stdout != c.stdout || r.stderr != c.stderr {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q, %q", c.args, r.code, r.stdout, r.stderr, c.stdout, c.stderr)
		}
	}
	// -f: the follow does not wait for an output.log that will never come.
	run := f.start("logs", "-f", "old", "db")
	run.stdout.WaitFor(t, "db 2\n", waitTimeout)
	f.engine.appendFile("c-old", supervisor.DaemonLogFile("db", false), "db 3\n")
	run.stdout.WaitFor(t, "db 3\n", waitTimeout)
	f.engine.stopContainer("c-old")
	if r := run.wait(t); r.code != 0 || r.stdout != "db 1\ndb 2\ndb 3\n" {
		t.Errorf("logs -f: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// One argument is a daemon of this project's sandbox, else a sandbox ID; no
// argument is this project's sandbox.
func TestLogsArguments(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	file, dir := projectFile(t)
	f.add(client.Sandbox{ID: "mine", Project: dir, DaemonNames: []string{"db"}})
	f.engine.writeFile("c-mine", supervisor.DaemonOutputLog("db"), "o db ready\n")
	logsSandbox(t, f)

	for _, c := range []struct {
		args   []string
		stdout string
	}{
		{[]string{"--file", file, "logs", "db"}, "db ready\n"},
		{[]string{"--file", file, "logs"}, "db ready\n"},
		{[]string{"--file", file, "logs", "s1", "api"}, "api 1\napi 2\napi 3\n"},
		{[]string{"logs", "mine"}, "db ready\n"},
	} {
		r := f.run(c.args...)
		if r.code != 0 || r.stdout != c.stdout {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", c.args, r.code, r.stdout, r.stderr, c.stdout)
		}
	}
	// "s1" is no daemon of the project's sandbox: it is a sandbox ID.
	r := f.run("--file", file, "logs", "-n", "1", "s1", "api")
	if r.code != 0 || r.stdout != "api 3\n" {
		t.Errorf("logs s1 from the project: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestLogsErrors(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	logsSandbox(t, f)
	f.add(client.Sandbox{ID: "gone", State: client.StateStopped})
	f.emit("gone", client.Event{Kind: "sandbox.deleting", State: client.StateDeleting})
	file, dir := projectFile(t)

	f.assertFailures([]cliFailure{
		{[]string{"logs", "s1", "nosuch"}, ExitFailure, `airlock: sandbox s1 has no daemon "nosuch"` + "\n"},
		{[]string{"logs", "nosuch"}, ExitFailure, "airlock: sandbox nosuch not found\n"},
		{[]string{"logs", "gone"}, ExitFailure, "airlock: sandbox gone was deleted; its logs are gone\n"},
		{[]string{"--file", file, "logs"}, ExitFailure, "airlock: no sandbox for the project " + dir + " (start one with `airlock up`)\n"},
		{[]string{"logs", "a", "b", "c"}, ExitUsage, "airlock: accepts at most 2 arg(s), received 3\n"},
		{[]string{"logs", "--tail", "x", "s1"}, ExitUsage, "airlock: invalid argument \"x\" for \"-n, --tail\" flag"},
		{[]string{"logs", "--stdout", "--stderr", "s1"}, ExitUsage, "airlock: give --stdout or --stderr, not both (without either, logs prints both streams)\n"},
	})
}

// A sandbox with no daemons, or no container yet, has no logs: nothing printed,
// and the Engine is not asked.
func TestLogsNothingToRead(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "nod"})
	r := f.run("logs", "nod")
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if reqs := f.engine.requests("GET", ".*"); len(reqs) != 0 {
		t.Errorf("the Engine was asked: %v", reqs)
	}
}

// -f prints what there is, then what is appended, until the sandbox stops.
func TestLogsFollow(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	logsSandbox(t, f)
	file := supervisor.DaemonOutputLog("api")

	run := f.start("logs", "-f", "-n", "1", "s1", "api")
	run.stdout.WaitFor(t, "api 3\n", waitTimeout)
	f.engine.appendFile("c-s1", file, "o api 4\ne api ")
	run.stdout.WaitFor(t, "api 4\n", waitTimeout)
	f.engine.appendFile("c-s1", file, "err 2\no api 5\n")
	run.stdout.WaitFor(t, "api 5\n", waitTimeout)
	f.engine.stopContainer("c-s1")
	r := run.wait(t)
	if r.code != 0 || r.stdout != "api 3\napi 4\napi 5\n" || r.stderr != "api err 2\n" {
		t.Errorf("logs -f: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// One exec finds that output.log is there (a followed file that is not is
	// waited for), one finds the last line in the sandbox and follows from
	// there: no line twice, none missed, and no download of the whole log.
	execs := f.engine.createdExecs()
	if len(execs) != 2 {
		t.Fatalf("want two tail execs, got %+v", execs)
	}
	if reqs := f.engine.requests("GET", "/containers/c-s1/archive"); len(reqs) != 0 {
		t.Errorf("the log was downloaded: %v", reqs)
	}
	probe := []string{backend.SupervisorIn, "supervise", "tail", "--max-line", "65538", "--lines", "0", "--", file}
	want := []string{backend.SupervisorIn, "supervise", "tail", "--max-line", "65538", "--follow", "--lines", "1", "--", file}
	if !slices.Equal(execs[0].Cmd, probe) || !slices.Equal(execs[1].Cmd, want) {
		t.Errorf("tail execs %q and %q, want %q and %q", execs[0].Cmd, execs[1].Cmd, probe, want)
	}
}

// -f with every daemon: each followed, prefixed, until the sandbox stops.
func TestLogsFollowEveryDaemon(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	logsSandbox(t, f)
	run := f.start("logs", "--follow", "s1")
	f.engine.waitFor("two tails", func() bool { return f.engine.runningExecs() == 2 })
	run.stdout.WaitFor(t, "api | api 3\n", waitTimeout)
	// A record that comes in two writes is printed whole once it ends.
	f.engine.appendFile("c-s1", supervisor.DaemonOutputLog("web"), "o web")
	f.engine.appendFile("c-s1", supervisor.DaemonOutputLog("web"), " 3\ne web err 3\n")
	f.engine.appendFile("c-s1", supervisor.DaemonOutputLog("api"), "o api 4\n")
	run.stdout.WaitFor(t, "web | web 3\n", waitTimeout)
	run.stdout.WaitFor(t, "api | api 4\n", waitTimeout)
	f.engine.stopContainer("c-s1")
	r := run.wait(t)
	if want := []string{"api | api 1", "api | api 2", "api | api 3", "api | api 4", "web | web 1", "web | web 2", "web | web 3"}; r.code != 0 || !slices.Equal(sortedLines(r.stdout), want) {
		t.Errorf("logs -f: exit %d, stdout %q, want the lines %q", r.code, r.stdout, want)
	}
	if want := []string{"api | api err 1", "web | web err 1", "web | web err 2", "web | web err 3"}; !slices.Equal(sortedLines(r.stderr), want) {
		t.Errorf("logs -f: stderr %q, want the lines %q", r.stderr, want)
	}
}

// A line longer than supervisor.MaxLogLine is cut: its first MaxLogLine bytes,
// then a marker with the number of bytes left out, also when it has no newline
// yet; linePrefixer never holds more of it.
func TestLongLinesCut(t *testing.T) {
	const max = supervisor.MaxLogLine
	long := strings.Repeat("x", 3*max+10)
	in := "short\n" + strings.Repeat("y", max) + "\n" + long + "\nafter\n" + long // the last line has no newline
	var out bytes.Buffer
	lp := &linePrefixer{w: &out, prefix: "d | ", max: max}
	for i := 0; i < len(in); i += 7777 {
		_, _ = lp.Write([]byte(in[i:min(i+7777, len(in))]))
		if cap(lp.partial) > 2*max {
			t.Fatalf("linePrefixer holds %d bytes of a line", cap(lp.partial))
		}
	}
	lp.finish()
	cut := "d | " + strings.Repeat("x", max) + supervisor.LineCut(2*max+10)
	want := []string{"d | short", "d | " + strings.Repeat("y", max), cut, "d | after", cut}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if !slices.Equal(got, want) {
		t.Errorf("got %d lines (lengths %v), want %d (lengths %v)", len(got), lineLengths(got), len(want), lineLengths(want))
	}
	if !strings.HasSuffix(cut, " [airlock: 131082 more bytes of this line not shown]") {
		t.Errorf("marker: %q", cut[len(cut)-60:])
	}

}

func lineLengths(lines []string) []int {
	var out []int
	for _, l := range lines {
		out = append(out, len(l))
	}
	return out
}
