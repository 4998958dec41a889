package docker

import (
	"reflect"
	"testing"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// TestAccountToAdd: a numeric sandbox user the image has no passwd entry for
// gets one (airlock, else airlock-UID), a group entry when its gid has none
// (named alike), and /home/NAME; a uid the image has gets nothing.
func TestAccountToAdd(t *testing.T) {
	passwd := [][]string{{"root", "x", "0", "0", "root", "/root", "/bin/sh"}, {"nobody", "x", "65534", "65534", "", "/nonexistent", "/bin/false"}}
	groups := [][]string{{"root", "x", "0", ""}, {"nobody", "x", "65534", ""}, {"staff", "x", "50", ""}}
	for _, tc := range []struct {
		name     string
		uid, gid int
		passwd   [][]string
		groups   [][]string
		want     *addedAccount
	}{
		{"a uid the image has", 65534, 65534, passwd, groups, nil},
		{"a new uid and gid", 1000, 1001, passwd, groups, &addedAccount{Name: "airlock", Group: "airlock", UID: 1000, GID: 1001, Home: "/home/airlock"}},
		{"a group the image has", 1000, 50, passwd, groups, &addedAccount{Name: "airlock", UID: 1000, GID: 50, Home: "/home/airlock"}},
		{"airlock is taken", 1000, 1000, append(passwd, []string{"airlock", "x", "999", "999"}), append(groups, []string{"airlock", "x", "999", ""}),
			&addedAccount{Name: "airlock-1000", Group: "airlock-1000", UID: 1000, GID: 1000, Home: "/home/airlock-1000"}},
		{"no accounts at all", 1000, 1000, nil, nil, &addedAccount{Name: "airlock", Group: "airlock", UID: 1000, GID: 1000, Home: "/home/airlock"}},
	} {
		if got := accountToAdd(tc.uid, tc.gid, tc.passwd, tc.groups); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	a := accountToAdd(1000, 1001, passwd, groups)
	if got := a.passwdLine() + a.groupLine(); got != "airlock:x:1000:1001:airlock sandbox user:/home/airlock:/bin/sh\nairlock:x:1001:\n" {
		t.Errorf("lines: %q", got)
	}
}

// TestMainUser: a root PID 1 beside a sandbox user that is not root runs the
// main command (and so exec and the shell) and every daemon that names no
// user as the sandbox user; a daemon's own user stays.
func TestMainUser(t *testing.T) {
	r := &manifest.Resolved{}
	r.Daemons = map[string]manifest.Daemon{
		"setup": {Command: []string{"setup"}, User: "root", Oneshot: true},
		"web":   {Command: []string{"web"}},
	}
	spec := backend.BuildSpec(&backend.Request{Command: []string{"make"}}, r)
	backend.MainUser(spec, "1000:1000")
	got := map[string]string{"main": spec.Main.User}
	for _, d := range spec.Daemons {
		got[d.Name] = d.User
	}
	if want := map[string]string{"main": "1000:1000", "setup": "root", "web": "1000:1000"}; !reflect.DeepEqual(got, want) {
		t.Errorf("users %v, want %v", got, want)
	}
}

// TestSameAccount: two spellings of one user are one user; another uid or
// gid, or a name the image does not have, is another.
func TestSameAccount(t *testing.T) {
	passwd := [][]string{{"root", "x", "0", "0", "root", "/root"}, {"nobody", "x", "65534", "65534", "", "/nonexistent"}}
	groups := [][]string{{"root", "x", "0", ""}, {"nobody", "x", "65534", ""}}
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"nobody", "65534", true},
		{"nobody", "65534:65534", true},
		{"nobody", "nobody:nobody", true},
		{"nobody", "root", false},
		{"nobody", "65534:0", false},
		{"nobody", "svc", false},
		{"1000", "1000:1000", true},
	} {
		if got := sameAccount(tc.a, tc.b, passwd, groups); got != tc.want {
			t.Errorf("sameAccount(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
