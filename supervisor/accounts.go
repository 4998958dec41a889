package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/manifest/specrules"
)

// The account files a user of the spec is resolved against: the sandbox's own.
const (
	passwdFile = "/etc/passwd"
	groupFile  = "/etc/group"
)

// maxAccountsSize bounds what is read of an account file.
const maxAccountsSize = 4 << 20

// account is a resolved user: the credentials a process runs with, and the
// home its HOME is set to.
type account struct {
	uid, gid uint32
	groups   []uint32 // supplementary groups, the primary one included
	home     string   // from the passwd entry; "/" without one
}

// lookupAccount resolves the user (a spec's user field) that what ("daemon
// redis", "the main command") runs as, in the sandbox's own account files; nil
// for "" (the supervisor's user). A supervisor that is not root can only run
// a process as itself.
func lookupAccount(what, spec string) (*account, error) {
	if spec == "" {
		return nil, nil
	}
	a, err := resolveAccount(spec, passwdFile, groupFile)
	if err != nil {
		return nil, fmt.Errorf("cannot run %s as user %q: %w", what, spec, err)
	}
	if euid := os.Geteuid(); euid != 0 && (int(a.uid) != euid || int(a.gid) != os.Getegid()) {
		return nil, fmt.Errorf("cannot run %s as user %q (uid %d, gid %d): the sandbox runs as uid %d, gid %d, and only a root sandbox can run a process as another user",
			what, spec, a.uid, a.gid, euid, os.Getegid())
	}
	return a, nil
}

// withHome returns env with HOME set to the account's home (env unchanged for
// nil), the way Docker sets HOME for a container's user; the process's own
// env entries still apply over it.
func withHome(env []string, a *account) []string {
	if a == nil || a.home == "" {
		return env
	}
	return setEnv(env, "HOME="+a.home)
}

// credential is what ForkExec switches to before exec. setgroups, setgid and
// setuid need CAP_SETGID and CAP_SETUID: a supervisor that is not root runs a
// process as itself only, so then it switches nothing.
func (a *account) credential() *syscall.Credential {
	if a == nil {
		return nil
	}
	if os.Geteuid() != 0 && int(a.uid) == os.Geteuid() && int(a.gid) == os.Getegid() {
		return nil
	}
	return &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: append([]uint32{}, a.groups...)}
}

// resolveAccount resolves spec ("name", "uid", "name:group", "uid:gid", ...)
// against the passwd and group files, as Docker resolves a container's user: a
// name must be in the passwd file and a group name in the group file; a numeric
// uid need not be (its group is then the uid, unless given). Without an explicit
// group the supplementary groups are the user's memberships in the group file;
// with one, that group only.
func resolveAccount(spec, passwdPath, groupPath string) (*account, error) {
	// The form (USER or USER:GROUP, ids in range) is the rule manifest
	// validation applies too.
	if err := specrules.User(spec); err != nil {
		return nil, err
	}
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	passwd, err := readAccountFile(passwdPath)
	if err != nil {
		return nil, err
	}
	a := &account{}
	var name string
	found := false
	uid, uidErr := parseID(userPart)
	for _, e := range passwd {
		if len(e) < 4 {
			continue
		}
		u, err1 := parseID(e[2])
		if e[0] == userPart || (uidErr == nil && err1 == nil && u == uid) {
			g, err2 := parseID(e[3])
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("the entry of %q in %s has no valid uid and gid", e[0], passwdPath)
			}
			name, a.uid, a.gid, found = e[0], u, g, true
			a.home = "/"
			if len(e) > 5 && e[5] != "" {
				a.home = e[5]
			}
			break
		}
	}
	switch {
	case found:
	case uidErr == nil:
		a.uid, a.gid, a.home = uid, uid, "/"
	default:
		return nil, fmt.Errorf("no such user in the sandbox's %s", passwdPath)
	}
	if !hasGroup && !found {
		a.groups = []uint32{a.gid}
		return a, nil
	}
	groups, err := readAccountFile(groupPath)
	if err != nil {
		return nil, err
	}
	if hasGroup {
		gid, gidErr := parseID(groupPart)
		ok := gidErr == nil
		for _, g := range groups {
			if len(g) >= 3 && g[0] == groupPart {
				if v, err := parseID(g[2]); err == nil {
					gid, ok = v, true
					break
				}
			}
		}
		if !ok {
			return nil, fmt.Errorf("no group %q in the sandbox's %s", groupPart, groupPath)
		}
		a.gid = gid
		a.groups = []uint32{gid}
		return a, nil
	}
	a.groups = []uint32{a.gid}
	for _, g := range groups {
		if len(g) < 4 {
			continue
		}
		gid, err := parseID(g[2])
		if err != nil {
			continue
		}
		for _, m := range strings.Split(g[3], ",") {
			if m == name && !containsID(a.groups, gid) {
				a.groups = append(a.groups, gid)
			}
		}
	}
	return a, nil
}

// readAccountFile reads the colon-separated entries of a passwd or group
// file; a missing file reads as empty.
func readAccountFile(path string) ([][]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(io.LimitReader(f, maxAccountsSize))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rows = append(rows, strings.Split(line, ":"))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	return rows, nil
}

// parseID parses a uid or gid: a decimal below 2^32-1 ((uid_t)-1 means "no
// change" to setuid).
func parseID(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v == math.MaxUint32 {
		return 0, fmt.Errorf("invalid id %q", s)
	}
	return uint32(v), nil
}

func containsID(ids []uint32, id uint32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
