// Package specrules holds the rules a daemon, an environment variable and a
// readiness check must follow, written once for both sides that enforce them:
// manifest validation (`airlock validate`, Load, the control daemon) on the
// host, and the supervisor's spec validation (PID 1 in the sandbox). Whatever
// validation accepts, the supervisor therefore runs; what the supervisor would
// refuse, validation refuses first, naming the key.
//
// It is a leaf: the standard library only, so the supervisor gets the rules
// without the manifest model (TOML decoding, layering, presets, egress rules).
//
// Each check returns nil or an error whose text follows a key path: callers
// prefix "daemons.redis.signal: " (manifest) or "cannot use spec:
// daemons.redis.signal: " (supervisor).
package specrules

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Bounds: what the Engine and the supervisor accept, so that an absurd value is
// a config error rather than a wrap-around once it becomes a time.Duration.
const (
	// MaxNameLength bounds entry names: a daemon's name names its log folder,
	// a service's becomes a host name (a DNS label).
	MaxNameLength = 63
	// MaxDuration bounds every duration (ready timeouts, healthcheck interval
	// and timeout): a year.
	MaxDuration = 365 * 24 * time.Hour
	// MaxDaemonTimeout bounds a daemon's timeout, in seconds: a year.
	MaxDaemonTimeout = int(MaxDuration / time.Second)
	// MaxCount bounds a daemon's max_restarts and a healthcheck's retries.
	MaxCount = 10000
)

// EntryNamePattern is the pattern of entry names (daemons, mounts, copies,
// services); they are at most MaxNameLength characters too.
const EntryNamePattern = `^[A-Za-z0-9][A-Za-z0-9_.-]*$`

// EnvNamePattern is the pattern of the names of the variables the supervisor
// sets in a process's environment ([env], daemons.*.env), and of the names
// ${VAR} substitution takes: what a shell can name.
const EnvNamePattern = `^[A-Za-z_][A-Za-z0-9_]*$`

// Restart policies of a daemon.
const (
	RestartAlways    = "always"
	RestartOnFailure = "on-failure"
)

// RestartPolicies are the values of a daemon's restart.
var RestartPolicies = []string{RestartAlways, RestartOnFailure}

// Defaults of a daemon's restart and max_restarts (design.md §3): what a one-shot
// daemon, which is never restarted, may hold.
const (
	DefaultRestart     = RestartAlways
	DefaultMaxRestarts = 10
)

// Signals are the stop signals a daemon may name (design.md §3).
var Signals = []string{"SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGKILL"}

// ReadyKinds are the readiness checks, in the order messages name them.
var ReadyKinds = []string{"tcp", "http", "cmd", "log"}

var (
	entryNameRE = regexp.MustCompile(EntryNamePattern)
	envNameRE   = regexp.MustCompile(EnvNamePattern)
)

// EntryName checks the name of a daemon (or of a mount, copy or service):
// letters, digits, '_', '.' and '-', starting with a letter or digit, at most
// MaxNameLength characters.
func EntryName(name string) error {
	if !entryNameRE.MatchString(name) {
		return errors.New("invalid name (use letters, digits, '_', '.' and '-', starting with a letter or digit)")
	}
	if len(name) > MaxNameLength {
		return fmt.Errorf("invalid name (at most %d characters, got %d)", MaxNameLength, len(name))
	}
	return nil
}

// ValidEnvName reports whether name matches EnvNamePattern.
func ValidEnvName(name string) bool { return envNameRE.MatchString(name) }

// EnvName checks the name of a variable the supervisor sets.
func EnvName(name string) error {
	if !ValidEnvName(name) {
		return errors.New("invalid variable name (use letters, digits and _, not starting with a digit)")
	}
	return nil
}

// Command checks a daemon's argv: a program is required.
func Command(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New(`is required: the program and its arguments, e.g. ["redis-server"]`)
	}
	return nil
}

// Cwd checks a daemon's working directory: an absolute path.
func Cwd(dir string) error {
	if !path.IsAbs(dir) {
		return fmt.Errorf("must be an absolute path, got %q", dir)
	}
	return nil
}

// PathDir checks a directory put in front of a process's PATH
// (sandbox.path_prepend): an absolute path without the list separator ':'.
func PathDir(dir string) error {
	switch {
	case !path.IsAbs(dir):
		return fmt.Errorf("must be an absolute path, got %q", dir)
	case strings.ContainsAny(dir, ":\x00"):
		return fmt.Errorf("must not contain ':' (PATH's separator) or a NUL byte, got %q", dir)
	}
	return nil
}

// PathDirs checks every directory of a path_prepend list.
func PathDirs(dirs []string) error {
	for i, d := range dirs {
		if err := PathDir(d); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	return nil
}

// Signal checks a daemon's stop signal: one of Signals.
func Signal(name string) error {
	if !slices.Contains(Signals, name) {
		return fmt.Errorf("unknown signal %q (use one of %s)", name, strings.Join(Signals, ", "))
	}
	return nil
}

// DaemonTimeout checks a daemon's timeout in seconds (0 waits forever).
func DaemonTimeout(seconds int) error {
	switch {
	case seconds < 0:
		return fmt.Errorf("must not be negative (0 waits forever), got %d", seconds)
	case seconds > MaxDaemonTimeout:
		return fmt.Errorf("must be at most %d seconds (a year; 0 waits forever), got %d", MaxDaemonTimeout, seconds)
	}
	return nil
}

// Restart checks a daemon's restart policy.
func Restart(policy string) error {
	if !slices.Contains(RestartPolicies, policy) {
		return fmt.Errorf("unknown policy %q (use one of %s)", policy, strings.Join(RestartPolicies, ", "))
	}
	return nil
}

// MaxRestarts checks a daemon's max_restarts (0 means no limit).
func MaxRestarts(n int) error {
	switch {
	case n < 0:
		return fmt.Errorf("must not be negative (0 means no limit), got %d", n)
	case n > MaxCount:
		return fmt.Errorf("must be at most %d (0 means no limit), got %d", MaxCount, n)
	}
	return nil
}

// Oneshot checks what a one-shot daemon (a setup step that runs once to
// completion) may not have: a ready check (its exit 0 is its readiness), and a
// restart or max_restarts other than the defaults (it is never restarted). It
// returns every problem, each at its key, in the order restart, max_restarts,
// ready.
func Oneshot(hasReady bool, restart string, maxRestarts int) []KeyError {
	const never = "a one-shot daemon is never restarted: exit 0 completes it, any other end fails the start"
	var out []KeyError
	if restart != DefaultRestart {
		out = append(out, KeyError{"restart", fmt.Errorf("%s (remove restart, or leave the default %q; got %q)", never, DefaultRestart, restart)})
	}
	if maxRestarts != DefaultMaxRestarts {
		out = append(out, KeyError{"max_restarts", fmt.Errorf("%s (remove max_restarts, or leave the default %d; got %d)", never, DefaultMaxRestarts, maxRestarts)})
	}
	if hasReady {
		out = append(out, KeyError{"ready", errors.New("a one-shot daemon has no ready check: its exit 0 is its readiness (remove ready, or oneshot)")})
	}
	return out
}

// User checks a process's user: USER or USER:GROUP, each a name (not empty, no
// blank, no colon, at most 256 bytes) or an id below 2^32-1. A name is looked
// up inside the sandbox when it starts.
func User(s string) error {
	if strings.Contains(s, "${") {
		return fmt.Errorf("%q is not substituted: ${VAR} applies only in env values, sandbox.image and mount and copy sources (write a name, uid or uid:gid, e.g. \"1000:1000\")", s)
	}
	if !validUser(s) {
		return fmt.Errorf("invalid user %q (use a name, uid, name:group or uid:gid, e.g. \"postgres\" or \"1000:1000\")", s)
	}
	return nil
}

func validUser(s string) bool {
	parts := strings.Split(s, ":")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 256 || strings.ContainsFunc(p, unicode.IsSpace) {
			return false
		}
		if strings.Trim(p, "0123456789") == "" {
			if n, err := strconv.ParseUint(p, 10, 32); err != nil || n == math.MaxUint32 {
				return false
			}
		}
	}
	return true
}

// Duration checks a duration: a Go duration, positive, at most MaxDuration.
func Duration(s string) error {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return fmt.Errorf("invalid duration %q (use a Go duration such as \"30s\" or \"2m\")", s)
	case d <= 0:
		return fmt.Errorf("must be positive, got %q", s)
	case d > MaxDuration:
		return fmt.Errorf("must be at most a year (8760h), got %q", s)
	}
	return nil
}

// ReadyTCP checks a tcp readiness check: host:port, with a port from 1 to 65535.
func ReadyTCP(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		return fmt.Errorf("invalid address %q (use host:port, e.g. \"127.0.0.1:6379\")", addr)
	}
	return nil
}

// ReadyHTTP checks an http readiness check: an http or https URL with a host.
func ReadyHTTP(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("invalid URL %q (use http://host:port/path)", raw)
	}
	return nil
}

// ReadyCmd checks a cmd readiness check: a program is required.
func ReadyCmd(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New(`must name a program, e.g. ["redis-cli", "ping"]`)
	}
	return nil
}

// ReadyLog checks a log readiness check: a regular expression (Go syntax).
func ReadyLog(re string) error {
	if _, err := regexp.Compile(re); err != nil {
		return fmt.Errorf("invalid regular expression: %v", err)
	}
	return nil
}

// maxExchange bounds a tcp check's send and expect.
const maxExchange = 1024

// ReadyExchange checks a readiness check's send and expect: they go with a tcp
// check, send needs expect (else nothing tells its answer), and each holds at
// most 1024 bytes. A problem is returned at the key it concerns.
func ReadyExchange(tcp, send, expect string) KeyError {
	for _, k := range []struct{ key, v string }{{"send", send}, {"expect", expect}} {
		switch {
		case k.v == "":
		case tcp == "":
			return KeyError{k.key, errors.New("goes with a tcp check (set tcp = \"host:port\")")}
		case len(k.v) > maxExchange:
			return KeyError{k.key, fmt.Errorf("is %d bytes long; at most %d", len(k.v), maxExchange)}
		}
	}
	if send != "" && expect == "" {
		return KeyError{"send", errors.New(`needs expect: what the server's answer must hold, e.g. send = "PING\r\n", expect = "+PONG"`)}
	}
	return KeyError{}
}

// KeyError is a problem at a key below the one checked ("" for that key itself).
type KeyError struct {
	Key string
	Err error
}

// Ready checks a readiness check but its timeout: each kind it sets by that
// kind's rule, then that it sets exactly one (ReadyOne). It returns every
// problem, each at the kind it concerns ("" for the check as a whole), in that
// order: a caller that stops at the first reports what validation reports first.
func Ready(tcp, http string, cmd []string, log string) []KeyError {
	var kinds []string
	var out []KeyError
	for _, k := range []struct {
		kind  string
		set   bool
		check func() error
	}{
		{"tcp", tcp != "", func() error { return ReadyTCP(tcp) }},
		{"http", http != "", func() error { return ReadyHTTP(http) }},
		{"cmd", cmd != nil, func() error { return ReadyCmd(cmd) }},
		{"log", log != "", func() error { return ReadyLog(log) }},
	} {
		if !k.set {
			continue
		}
		kinds = append(kinds, k.kind)
		if err := k.check(); err != nil {
			out = append(out, KeyError{k.kind, err})
		}
	}
	if err := ReadyOne(kinds); err != nil {
		out = append(out, KeyError{"", err})
	}
	return out
}

// ReadyOne checks that a readiness check sets exactly one kind; kinds are the
// kinds it sets, in ReadyKinds order.
func ReadyOne(kinds []string) error {
	switch len(kinds) {
	case 0:
		return errors.New("needs exactly one check: tcp, http, cmd or log")
	case 1:
		return nil
	}
	return fmt.Errorf("sets %s; set exactly one check", strings.Join(kinds, " and "))
}

// After checks a daemon's after list against the declared daemons (sorted
// names): no name twice, not the daemon itself, no unknown daemon. It returns
// every problem, in the list's order.
func After(name string, after, declared []string) []error {
	var errs []error
	for i, a := range after {
		switch {
		case slices.Contains(after[:i], a):
			errs = append(errs, fmt.Errorf("names %q twice", a))
		case a == name:
			errs = append(errs, errors.New("a daemon cannot wait for itself"))
		case !slices.Contains(declared, a):
			errs = append(errs, fmt.Errorf("unknown daemon %q (declared daemons: %s)", a, strings.Join(declared, ", ")))
		}
	}
	return errs
}

// Cycles returns each cycle of the after graph (daemon name to the names it
// waits for) found by a depth-first walk in name order, as the chain of names
// with its first name repeated at the end: [a c b a]. Edges to unknown
// daemons and to the daemon itself are left to After. Every daemon of a graph
// without cycles can be ordered.
func Cycles(after map[string][]string) [][]string {
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	var stack []string
	var cycles [][]string
	var visit func(string)
	visit = func(n string) {
		state[n] = visiting
		stack = append(stack, n)
		for _, a := range after[n] {
			if _, ok := after[a]; !ok || a == n {
				continue
			}
			switch state[a] {
			case unvisited:
				visit(a)
			case visiting:
				i := slices.Index(stack, a)
				cycles = append(cycles, append(slices.Clone(stack[i:]), a))
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
	}
	for _, n := range slices.Sorted(maps.Keys(after)) {
		if state[n] == unvisited {
			visit(n)
		}
	}
	return cycles
}
