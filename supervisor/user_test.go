package supervisor

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A daemon's user (issue 13): resolved in the sandbox's /etc/passwd and
// /etc/group before anything starts, credentials (groups too) switched before
// exec; and a daemon that fails the same way on every launch before it was
// ever ready gives up at once.

const (
	testPasswd = `root:x:0:0:root:/root:/bin/sh
# a comment
postgres:x:101:104:PostgreSQL administrator,,,:/var/lib/postgresql:/bin/bash
app:x:1000:1000::/home/app:/bin/sh
nohome:x:1001:1001:::/bin/sh
broken:x:abc:1:::/bin/sh
`
	testGroup = `root:x:0:
ssl-cert:x:103:postgres
postgres:x:104:
staff:x:50:app,postgres
app:x:1000:
empty:x:60:
`
)

func TestResolveAccount(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	passwd, group := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	if err := os.WriteFile(passwd, []byte(testPasswd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(group, []byte(testGroup), 0o644); err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]Account{
		"postgres":       {UID: 101, GID: 104, Groups: []uint32{104, 103, 50}, Home: "/var/lib/postgresql"},
		"101":            {UID: 101, GID: 104, Groups: []uint32{104, 103, 50}, Home: "/var/lib/postgresql"},
		"app":            {UID: 1000, GID: 1000, Groups: []uint32{1000, 50}, Home: "/home/app"},
		"root":           {UID: 0, GID: 0, Groups: []uint32{0}, Home: "/root"},
		"nohome":         {UID: 1001, GID: 1001, Groups: []uint32{1001}, Home: "/"},
		"4242":           {UID: 4242, GID: 4242, Groups: []uint32{4242}, Home: "/"},
		"4242:50":        {UID: 4242, GID: 50, Groups: []uint32{50}, Home: "/"},
		"4242:staff":     {UID: 4242, GID: 50, Groups: []uint32{50}, Home: "/"},
		"postgres:staff": {UID: 101, GID: 50, Groups: []uint32{50}, Home: "/var/lib/postgresql"},
		"app:7":          {UID: 1000, GID: 7, Groups: []uint32{7}, Home: "/home/app"},
	} {
		got, err := resolveAccount(spec, passwd, group)
		if err != nil {
			t.Errorf("%s: %v", spec, err)
			continue
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: got %+v, want %+v", spec, *got, want)
		}
	}
	for spec, msg := range map[string]string{
		"ghost":      "no such user in the sandbox's " + passwd,
		"app:ghosts": `no group "ghosts" in the sandbox's ` + group,
		"broken":     `the entry of "broken" in the sandbox's ` + passwd + " has no valid uid and gid",
		// The form is specrules.User's, as manifest validation checks it.
		"4294967295":             `invalid user "4294967295"`,
		"99999999999":            `invalid user "99999999999"`,
		"1:4294967295":           `invalid user "1:4294967295"`,
		"a:b:c":                  `invalid user "a:b:c"`,
		"a b":                    `invalid user "a b"`,
		"a\u00a0b":               `invalid user "a\u00a0b"`,
		strings.Repeat("x", 300): "invalid user",
	} {
		if _, err := resolveAccount(spec, passwd, group); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: err %v, want %q", spec, err, msg)
		}
	}
	// Without the files a name is unknown and a number is enough.
	if _, err := resolveAccount("postgres", filepath.Join(dir, "none"), filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "no such user") {
		t.Errorf("no passwd file: %v", err)
	}
	if a, err := resolveAccount("7:8", filepath.Join(dir, "none"), filepath.Join(dir, "none")); err != nil || a.UID != 7 || a.GID != 8 {
		t.Errorf("no files, 7:8: %+v %v", a, err)
	}
}

// ids is what a process of the test reports about itself.
const idsScript = `grep -E '^(Uid|Gid|Groups):' /proc/self/status | tr -s '\t ' ' '; echo "HOME: $HOME"`

// TestDaemonUser: a daemon (and its cmd check) runs as its user, with that
// user's groups and home; a numeric user needs no passwd entry (needs root).
func TestDaemonUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to change user")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("this host has no user nobody")
	}
	s := newSandbox(t)
	s.spec.Main.Argv = sh(idsScript)
	s.spec.Main.User, s.spec.Main.Cwd = "4242:4343", "/"
	// The check runs as the daemon's user too, and passes once the daemon
	// has printed (it is then the sleep it execs): a main command that ends
	// at once must not end the daemon before its lines are in its log.
	named := s.daemon("named", sh(idsScript+"; exec sleep 100.25"))
	named.User, named.Cwd = "nobody", "/"
	named.Ready = &Ready{Cmd: sh(`[ "$(id -u)" = ` + nobody.Uid + ` ] && pgrep -u ` + nobody.Uid + ` -xf 'sleep 100.25' >/dev/null`), Timeout: "20s"}
	num := s.daemon("num", sh(idsScript+"; exec sleep 100"))
	num.User, num.Cwd = "4242:4343", "/"
	num.Ready = &Ready{Log: "^HOME", Timeout: "20s"}
	r := s.run()
	if r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	wantNobody := fmt.Sprintf("Uid: %[1]s %[1]s %[1]s %[1]s\nGid: %[2]s %[2]s %[2]s %[2]s\n", nobody.Uid, nobody.Gid)
	if got := s.read("logs/named/stdout.log"); !strings.HasPrefix(got, wantNobody) || !strings.Contains(got, "HOME: "+nobody.HomeDir+"\n") {
		t.Errorf("daemon as nobody reports:\n%s\nwant it to start with\n%s(and HOME %s)", got, wantNobody, nobody.HomeDir)
	}
	wantNum := "Uid: 4242 4242 4242 4242\nGid: 4343 4343 4343 4343\nGroups: 4343 \nHOME: /\n"
	if got := s.read("logs/num/stdout.log"); got != wantNum {
		t.Errorf("daemon as 4242:4343 reports:\n%q\nwant\n%q", got, wantNum)
	}
	if r.stdout != wantNum {
		t.Errorf("main command as 4242:4343 reports:\n%q\nwant\n%q", r.stdout, wantNum)
	}
}

// TestDaemonUserUnknown: a user that is not in /etc/passwd fails the start
// with 125 naming the daemon, before any daemon or the main command runs.
func TestDaemonUserUnknown(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.spec.Main.Argv = sh(fmt.Sprintf("touch %q", s.path("main-ran")))
	s.daemon("first", sh(fmt.Sprintf("touch %q; exec sleep 100", s.path("first-ran"))))
	ghost := s.daemon("ghost", sh("exec sleep 100"))
	ghost.User = "airlock-no-such-user"
	r := s.run()
	want := `airlock: cannot run daemon ghost as user "airlock-no-such-user": no such user in the sandbox's /etc/passwd`
	if r.code != 125 || !strings.Contains(r.stderr, want) {
		t.Fatalf("code %d, stderr:\n%s\nwant 125 and %q", r.code, r.stderr, want)
	}
	for _, f := range []string{"main-ran", "first-ran"} {
		if _, err := os.Stat(s.path(f)); err == nil {
			t.Errorf("%s: something ran although a daemon's user does not exist", f)
		}
	}
	evs := s.events()
	if n := len(filter(evs, "", KindDaemonStarted)); n != 0 {
		t.Errorf("%d daemon.started events", n)
	}
	if f := filter(evs, "", KindSupervisorFailed); len(f) != 1 || !strings.Contains(f[0].Reason, "daemon ghost") {
		t.Errorf("supervisor.failed events: %+v", f)
	}
}

// TestSameFailureGivesUp: a daemon whose ready check has not passed and that
// fails the same way on 3 launches in a row (numbers in its output aside) gives
// up then, not at max_restarts, and the start fails at once naming why.
// Failures that differ, or a daemon without a check, go on to max_restarts.
func TestSameFailureGivesUp(t *testing.T) {
	t.Parallel()
	t.Run("same", func(t *testing.T) {
		t.Parallel()
		s := newSandbox(t)
		s.unit = 0 // the real backoff: 1 s, then 2 s
		s.spec.Main.Argv = sh(fmt.Sprintf("touch %q", s.path("main-ran")))
		d := s.daemon("db", sh(`echo "$(date +%s%N) [$$] initdb: error: cannot be run as root" >&2; exit 1`))
		d.MaxRestarts = ptr(10)
		d.Ready = &Ready{TCP: freeAddr(t), Timeout: "60s"}
		r := s.run()
		if r.code != 125 {
			t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
		}
		for _, want := range []string{
			"airlock: daemon db exited before it was ready (tcp ",
			"): it failed the same way (exit 1) on 3 launches in a row, so it was not restarted again; see " + s.spec.LogDir + "/db/stderr.log",
			"initdb: error: cannot be run as root",
			"✘ daemon db: gave up after 3 launches (exit 1)",
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
		// Launches at 0, 1 and 3 s; not the 55 s of ten backoff delays.
		if r.elapsed > 15*time.Second {
			t.Errorf("the start failed after %v", r.elapsed)
		}
		evs := s.events()
		if n := len(filter(evs, "db", KindDaemonStarted)); n != 3 {
			t.Errorf("%d launches, want 3", n)
		}
		g := filter(evs, "db", KindDaemonGaveUp)
		if len(g) != 1 || g[0].Attempt != 3 || g[0].Reason != "the same failure on 3 launches in a row before it was ready" {
			t.Errorf("gave_up events: %+v", g)
		}
		if _, err := os.Stat(s.path("main-ran")); err == nil {
			t.Errorf("the main command ran")
		}
	})
	// A first launch that failed otherwise is not one of the row: the
	// messages count the launches that failed the same way.
	t.Run("after another failure", func(t *testing.T) {
		t.Parallel()
		s := newSandbox(t)
		s.unit = 0
		d := s.daemon("db", sh(fmt.Sprintf(`if [ ! -e %q ]; then touch %q; echo "first: no config" >&2; exit 2; fi; echo "initdb: error: cannot be run as root" >&2; exit 1`, s.path("once"), s.path("once"))))
		d.MaxRestarts = ptr(10)
		d.Ready = &Ready{TCP: freeAddr(t), Timeout: "60s"}
		r := s.run()
		if r.code != 125 {
			t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
		}
		for _, want := range []string{
			"): it failed the same way (exit 1) on 3 launches in a row, so it was not restarted again",
			"✘ daemon db: gave up after 4 launches (exit 1)",
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
		g := filter(s.events(), "db", KindDaemonGaveUp)
		if len(g) != 1 || g[0].Attempt != 4 || g[0].Reason != "the same failure on 3 launches in a row before it was ready" {
			t.Errorf("gave_up events: %+v", g)
		}
	})
	t.Run("different", func(t *testing.T) {
		t.Parallel()
		s := newSandbox(t)
		// Each launch exits with another code.
		d := s.daemon("db", sh(fmt.Sprintf(`echo x >> %q; exit $(wc -l < %q)`, s.path("n"), s.path("n"))))
		d.MaxRestarts = ptr(4)
		d.Ready = &Ready{TCP: freeAddr(t), Timeout: "60s"}
		r := s.run()
		if r.code != 125 || !strings.Contains(r.stderr, "✘ daemon db: gave up after 5 launches (exit 5)") || strings.Contains(r.stderr, "the same way") {
			t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("no check", func(t *testing.T) {
		t.Parallel()
		s := newSandbox(t)
		s.mainWaitsForStop()
		d := s.daemon("db", sh("echo same >&2; exit 1"))
		d.MaxRestarts = ptr(4)
		s.start()
		r := s.stopAfter(KindDaemonGaveUp)
		if r.code != 0 || !strings.Contains(r.stderr, "✘ daemon db: gave up after 5 launches (exit 1)") {
			t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
		}
	})
}
