package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
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

// Account is a resolved user: the credentials a process runs with, and the
// home its HOME is set to.
type Account struct {
	UID, GID uint32
	Groups   []uint32 // supplementary groups, the primary one included
	Home     string   // from the passwd entry; "/" without one
}

// lookupAccount resolves the user (a spec's user field) that what ("daemon
// redis", "the main command") runs as, in the sandbox's own account files; nil
// for "" (the supervisor's user). A supervisor that is not root can only run
// a process as itself.
func lookupAccount(what, spec string) (*Account, error) {
	if spec == "" {
		return nil, nil
	}
	a, err := resolveAccount(spec, passwdFile, groupFile)
	if err != nil {
		return nil, fmt.Errorf("cannot run %s as user %q: %w", what, spec, err)
	}
	if euid := os.Geteuid(); euid != 0 && (int(a.UID) != euid || int(a.GID) != os.Getegid()) {
		return nil, fmt.Errorf("cannot run %s as user %q (uid %d, gid %d): the sandbox runs as uid %d, gid %d, and only a root sandbox can run a process as another user",
			what, spec, a.UID, a.GID, euid, os.Getegid())
	}
	return a, nil
}

// withHome returns env with HOME set to the account's home (env unchanged for
// nil), the way Docker sets HOME for a container's user; the process's own
// env entries still apply over it.
func withHome(env []string, a *Account) []string {
	if a == nil || a.Home == "" {
		return env
	}
	return setEnv(env, "HOME="+a.Home)
}

// credential is what ForkExec switches to before exec. setgroups, setgid and
// setuid need CAP_SETGID and CAP_SETUID: a supervisor that is not root runs a
// process as itself only, so then it switches nothing.
func (a *Account) credential() *syscall.Credential {
	if a == nil {
		return nil
	}
	if os.Geteuid() != 0 && int(a.UID) == os.Geteuid() && int(a.GID) == os.Getegid() {
		return nil
	}
	return &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: append([]uint32{}, a.Groups...)}
}

// resolveAccount resolves spec ("name", "uid", "name:group", "uid:gid", ...)
// against the passwd and group files, as Docker resolves a container's user: a
// name must be in the passwd file and a group name in the group file; a numeric
// uid need not be (its group is then the uid, unless given). Without an explicit
// group the supplementary groups are the user's memberships in the group file;
// with one, that group only.
func resolveAccount(spec, passwdPath, groupPath string) (*Account, error) {
	// The form (USER or USER:GROUP, ids in range) is the rule manifest
	// validation applies too.
	if err := specrules.User(spec); err != nil {
		return nil, err
	}
	passwd, err := readAccountFile(passwdPath)
	if err != nil {
		return nil, err
	}
	group, err := readAccountFile(groupPath)
	if err != nil {
		return nil, err
	}
	return ResolveAccount(spec, AccountFile{Name: "the sandbox's " + passwdPath, Rows: passwd}, AccountFile{Name: "the sandbox's " + groupPath, Rows: group})
}

// AccountFile is the entries of a passwd or group file (the colon-separated
// fields of each line), with the name errors give it.
type AccountFile struct {
	Name string
	Rows [][]string
}

// ErrNoSuchUser and ErrNoSuchGroup are what ResolveAccount's errors wrap when a
// name is not in its file.
var (
	ErrNoSuchUser  = errors.New("no such user")
	ErrNoSuchGroup = errors.New("no such group")
)

// ResolveAccount resolves spec (USER or USER:GROUP, each a name or an id) against
// passwd and group entries as runc resolves a container's user, for both sides
// that do it: the host (sandbox.user against the image) and PID 1 (a daemon's
// user against the sandbox). A name is looked up by name and must be there; a
// number is looked up by id and stands for itself when absent (its group is
// then the uid, its home "/"). Without an explicit group the supplementary
// groups are the user's memberships in the group file; with one, that group only.
func ResolveAccount(spec string, passwd, group AccountFile) (*Account, error) {
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	uid, uidErr := parseID(userPart)
	a := &Account{}
	name, found := "", false
	for _, e := range passwd.Rows {
		if len(e) < 4 || (uidErr != nil && e[0] != userPart) {
			continue
		}
		u, err1 := parseID(e[2])
		if uidErr == nil && (err1 != nil || u != uid) {
			continue
		}
		g, err2 := parseID(e[3])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("the entry of %q in %s has no valid uid and gid", e[0], passwd.Name)
		}
		name, a.UID, a.GID, found = e[0], u, g, true
		a.Home = "/"
		if len(e) > 5 && e[5] != "" {
			a.Home = e[5]
		}
		break
	}
	switch {
	case found:
	case uidErr == nil:
		a.UID, a.GID, a.Home = uid, uid, "/"
	default:
		return nil, fmt.Errorf("%w in %s", ErrNoSuchUser, passwd.Name)
	}
	if hasGroup {
		gid, err := parseID(groupPart)
		if err != nil {
			ok := false
			for _, g := range group.Rows {
				if len(g) >= 3 && g[0] == groupPart {
					if gid, err = parseID(g[2]); err == nil {
						ok = true
						break
					}
				}
			}
			if !ok {
				return nil, fmt.Errorf("%w: no group %q in %s", ErrNoSuchGroup, groupPart, group.Name)
			}
		}
		a.GID = gid
		a.Groups = []uint32{gid}
		return a, nil
	}
	a.Groups = []uint32{a.GID}
	if !found {
		return a, nil
	}
	for _, g := range group.Rows {
		if len(g) < 4 {
			continue
		}
		gid, err := parseID(g[2])
		if err != nil {
			continue
		}
		for _, m := range strings.Split(g[3], ",") {
			if m == name && !slices.Contains(a.Groups, gid) {
				a.Groups = append(a.Groups, gid)
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
