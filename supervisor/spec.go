package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/manifest/specrules"
)

// SpecVersion is the only spec format version this supervisor reads.
const SpecVersion = 1

// Defaults of the spec, the same as the manifest's (design.md §3), so a spec
// written by hand may leave them out. The log dir and the status stream default
// to the sandbox's layout (layout.go), where the runtime puts them too.
const (
	DefaultLogDir       = DaemonLogRoot
	DefaultStatusFile   = StatusFile
	DefaultSignal       = "SIGTERM"
	DefaultTimeout      = 10
	DefaultRestart      = specrules.DefaultRestart
	DefaultMaxRestarts  = specrules.DefaultMaxRestarts
	DefaultReadyTimeout = 30 * time.Second
	DefaultDaemonCwd    = "/"
)

// Restart policies.
const (
	RestartAlways    = specrules.RestartAlways
	RestartOnFailure = specrules.RestartOnFailure
)

// maxSpecSize bounds the spec file the supervisor is willing to read.
const maxSpecSize = 4 << 20

// Bounds of a spec's numbers: the manifest's, from the rules both apply
// (package specrules), so that every spec made from a valid manifest is
// accepted and no value wraps around when it becomes a time.Duration.
const (
	// MaxTimeout bounds a daemon's timeout, in seconds: a year.
	MaxTimeout = specrules.MaxDaemonTimeout
	// MaxRestarts bounds a daemon's max_restarts.
	MaxRestarts = specrules.MaxCount
	// MaxReadyTimeout bounds a readiness check's timeout: a year.
	MaxReadyTimeout = specrules.MaxDuration
)

// Spec is the supervisor's input, written by the runtime as JSON. See
// docs/supervisor.md for every field.
type Spec struct {
	Version    int    `json:"version"`
	LogDir     string `json:"log_dir,omitempty"`
	StatusFile string `json:"status_file,omitempty"`
	Quiet      bool   `json:"quiet,omitempty"`
	// ExecEnvFile, when set, is where the supervisor writes the main command's
	// resolved environment (mode 0600) for `supervise exec`; it belongs on a
	// tmpfs, and is removed when the supervisor exits.
	ExecEnvFile string `json:"exec_env_file,omitempty"`
	// SecretsSocket, when set and an env entry takes a secret, is where the
	// supervisor waits for the values to be delivered (see ReceiveSecrets); it
	// belongs on a tmpfs.
	SecretsSocket string `json:"secrets_socket,omitempty"`
	// StatusReadFile, when set, is where the host's follower of the status
	// stream reports how much it read; at exit the supervisor waits a moment
	// for it to have read everything. It belongs on a tmpfs.
	StatusReadFile string `json:"status_read_file,omitempty"`
	// Hold, with SecretsSocket, makes the supervisor wait for one delivery on
	// that socket before it starts anything, even when no env entry takes a
	// secret (an empty object releases it): the Kubernetes backend copies the
	// project in meanwhile. Given a --secrets file, it takes that and does not wait.
	// With Park, the hold's delivery (an empty object) comes first, then the
	// claim.
	Hold bool `json:"hold,omitempty"`
	// HoldTimeout, in seconds, bounds the wait for a held or secret delivery
	// (0: DeliveryTimeout): the runtime starts the services that share the
	// sandbox's network namespace meanwhile, within their ready_timeout.
	HoldTimeout int `json:"hold_timeout,omitempty"`
	// Park, with SecretsSocket, makes a pooled sandbox's supervisor: it starts
	// the daemons that take no delivered value (nor come after one that does),
	// reports supervisor.parked once they are ready and waits, without a
	// timeout, for a delivery holding a Claim (the main command, its env and
	// the values) before it starts the rest (see claim.go).
	Park bool `json:"park,omitempty"`
	// ClaimStdin, with Park, takes the claim from the first line of the
	// supervisor's stdin (the host's attach to the container) instead of the
	// socket: a delivery without an exec. The bytes after that line are the
	// main command's stdin. A claim refused there ends the run with 125.
	ClaimStdin bool `json:"claim_stdin,omitempty"`
	// EndMarker, when set (a run that need not wait for its daemons'
	// shutdown), makes the supervisor write EndMarker(EndMarker, code) on
	// stdout and stderr once the main command exited and the daemons that
	// stop within fastEndWait did, when others still stop: the host then has
	// the whole output and the code while they finish. Letters and digits only.
	EndMarker string `json:"end_marker,omitempty"`
	// PathPrepend are directories put in front of the PATH of the main
	// command and of every daemon (sandbox.path_prepend, then the builtin
	// tools'), after their env entries were applied: in front of the image's
	// PATH, or of the PATH their env sets. `supervise exec` takes the main
	// command's environment, so an exec gets it too.
	PathPrepend []string `json:"path_prepend,omitempty"`
	// Forwards listen on the sandbox's loopback and connect each client to
	// another container's port (services.*.ports), from before the daemons
	// start until the supervisor exits.
	Forwards []Forward `json:"forwards,omitempty"`
	Main     Main      `json:"main"`
	Daemons  []*Daemon `json:"daemons,omitempty"`
}

// Main is the main command: the foreground process whose exit ends the sandbox.
type Main struct {
	Argv   []string   `json:"argv"`
	Env    []EnvEntry `json:"env,omitempty"`
	Cwd    string     `json:"cwd,omitempty"`
	User   string     `json:"user,omitempty"`
	Harden *bool      `json:"harden,omitempty"`
}

// Daemon is one sidecar process.
type Daemon struct {
	Name        string     `json:"name"`
	Command     []string   `json:"command"`
	Cwd         string     `json:"cwd,omitempty"`
	Env         []EnvEntry `json:"env,omitempty"`
	User        string     `json:"user,omitempty"`
	Signal      string     `json:"signal,omitempty"`
	Timeout     *int       `json:"timeout,omitempty"`
	Restart     string     `json:"restart,omitempty"`
	MaxRestarts *int       `json:"max_restarts,omitempty"`
	Harden      *bool      `json:"harden,omitempty"`
	After       []string   `json:"after,omitempty"`
	Ready       *Ready     `json:"ready,omitempty"`
	// Oneshot makes the daemon a setup step: one launch, never restarted;
	// its exit 0 is its readiness, anything else fails the start.
	Oneshot bool `json:"oneshot,omitempty"`
}

// Ready is a daemon's readiness check: exactly one of TCP, HTTP, Cmd or Log.
type Ready struct {
	TCP string `json:"tcp,omitempty"`
	// Send is written on the tcp check's connection; Expect must then come
	// in what the server answers (both optional).
	Send    string   `json:"send,omitempty"`
	Expect  string   `json:"expect,omitempty"`
	HTTP    string   `json:"http,omitempty"`
	Cmd     []string `json:"cmd,omitempty"`
	Log     string   `json:"log,omitempty"`
	Timeout string   `json:"timeout,omitempty"`
}

// EnvEntry is one environment variable: a literal Value, or a Secret key whose
// value comes from the secrets file.
type EnvEntry struct {
	Name   string  `json:"name"`
	Value  *string `json:"value,omitempty"`
	Secret string  `json:"secret,omitempty"`
}

// daemonNameRE matches a valid daemon name (the status reader checks the names
// of events with it), by the rule of package specrules.
var daemonNameRE daemonNameRule

type daemonNameRule struct{}

func (daemonNameRule) MatchString(name string) bool { return specrules.EntryName(name) == nil }

// SpecFlag is the supervisor's flag that carries the spec itself on its command
// line (a spec holds no secret); `supervise exec` finds it in PID 1's.
const SpecFlag = "--spec-json"

// LoadSpec reads, decodes, defaults and validates the spec file at path; when no
// file is there, the spec PID 1 got on its command line (SpecFlag).
func LoadSpec(path string) (*Spec, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if data, ok := specOfPID1(); ok {
			return ParseSpec(data)
		}
	}
	return loadSpecFile(path)
}

// specOfPID1 returns the spec on PID 1's command line, if it has one.
func specOfPID1() ([]byte, bool) {
	b, err := os.ReadFile("/proc/1/cmdline")
	if err != nil {
		return nil, false
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	for i := 0; i+1 < len(args); i++ {
		if args[i] == SpecFlag {
			return []byte(args[i+1]), true
		}
	}
	return nil, false
}

func loadSpecFile(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read spec: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSpecSize+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read spec %s: %w", path, err)
	}
	if len(data) > maxSpecSize {
		return nil, fmt.Errorf("cannot read spec %s: larger than %d bytes", path, maxSpecSize)
	}
	s, err := ParseSpec(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return s, nil
}

// ParseSpec decodes a spec strictly (unknown fields are errors), applies the
// defaults and validates it.
func ParseSpec(data []byte) (*Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("cannot decode spec: %w", err)
	}
	if dec.More() {
		return nil, errors.New("cannot decode spec: trailing data after the JSON object")
	}
	if s.Version != SpecVersion {
		return nil, fmt.Errorf("cannot use spec version %d: this supervisor reads version %d", s.Version, SpecVersion)
	}
	s.applyDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *Spec) applyDefaults() {
	if s.LogDir == "" {
		s.LogDir = DefaultLogDir
	}
	if s.StatusFile == "" {
		s.StatusFile = DefaultStatusFile
	}
	if s.Main.Harden == nil {
		s.Main.Harden = ptr(true)
	}
	for _, d := range s.Daemons {
		if d == nil {
			continue
		}
		if d.Cwd == "" {
			d.Cwd = DefaultDaemonCwd
		}
		if d.Signal == "" {
			d.Signal = DefaultSignal
		}
		if d.Timeout == nil {
			d.Timeout = ptr(DefaultTimeout)
		}
		if d.Restart == "" {
			d.Restart = DefaultRestart
		}
		if d.MaxRestarts == nil {
			d.MaxRestarts = ptr(DefaultMaxRestarts)
		}
		if d.Harden == nil {
			d.Harden = ptr(true)
		}
		if d.Ready != nil && d.Ready.Timeout == "" {
			d.Ready.Timeout = DefaultReadyTimeout.String()
		}
	}
}

// Validate checks a defaulted spec; the first problem found is returned as a
// "cannot …" error naming the field. What a manifest also has (names, command,
// cwd, signal, bounds, user, env names, ready checks, after and its cycles) is
// checked by the rules manifest validation applies (package specrules), so a
// spec made from a valid manifest is valid and the other way round.
func (s *Spec) Validate() error {
	if s.Hold && s.SecretsSocket == "" {
		return errors.New("cannot use spec: hold needs secrets_socket (where the release is delivered)")
	}
	if s.Park && s.SecretsSocket == "" {
		return errors.New("cannot use spec: park needs secrets_socket (where the claim is delivered)")
	}
	if s.ClaimStdin && !s.Park {
		return errors.New("cannot use spec: claim_stdin needs park")
	}
	if s.HoldTimeout < 0 || time.Duration(s.HoldTimeout)*time.Second > MaxReadyTimeout {
		return fmt.Errorf("cannot use spec: hold_timeout must be 0 to %d seconds, got %d", int(MaxReadyTimeout/time.Second), s.HoldTimeout)
	}
	if len(s.Main.Argv) > 0 && s.Main.Argv[0] == "" {
		return errors.New("cannot use spec: main.argv[0] is empty")
	}
	if err := checkEndMarker(s.EndMarker); err != nil {
		return fmt.Errorf("cannot use spec: %w", err)
	}
	if err := validateEnv("main.env", s.Main.Env); err != nil {
		return err
	}
	if err := specrules.PathDirs(s.PathPrepend); err != nil {
		return fmt.Errorf("cannot use spec: path_prepend: %w", err)
	}
	for i, f := range s.Forwards {
		if err := checkForward(f); err != nil {
			return fmt.Errorf("cannot use spec: forwards[%d]: %w", i, err)
		}
	}
	if s.Main.User != "" {
		if err := specrules.User(s.Main.User); err != nil {
			return fmt.Errorf("cannot use spec: main.user: %w", err)
		}
	}
	names := make([]string, 0, len(s.Daemons))
	graph := make(map[string][]string, len(s.Daemons))
	for i, d := range s.Daemons {
		if d == nil {
			return fmt.Errorf("cannot use spec: daemons[%d] is null", i)
		}
		if err := specrules.EntryName(d.Name); err != nil {
			return fmt.Errorf("cannot use spec: daemons[%d].name %q: %w", i, d.Name, err)
		}
		if _, dup := graph[d.Name]; dup {
			return fmt.Errorf("cannot use spec: daemon %s is defined twice", d.Name)
		}
		graph[d.Name] = d.After
		names = append(names, d.Name)
	}
	slices.Sort(names)
	for _, d := range s.Daemons {
		if err := d.validate(names); err != nil {
			return err
		}
	}
	if cycles := specrules.Cycles(graph); len(cycles) > 0 {
		return fmt.Errorf("cannot order daemons: cycle in after: %s", strings.Join(cycles[0], " -> "))
	}
	return nil
}

// validate checks a defaulted daemon; declared are the spec's daemon names, sorted.
func (d *Daemon) validate(declared []string) error {
	p := "daemons." + d.Name
	checks := []struct {
		key string
		err error
	}{
		{"command", specrules.Command(d.Command)},
		{"cwd", specrules.Cwd(d.Cwd)},
		{"signal", specrules.Signal(d.Signal)},
		{"timeout", specrules.DaemonTimeout(*d.Timeout)},
		{"restart", specrules.Restart(d.Restart)},
		{"max_restarts", specrules.MaxRestarts(*d.MaxRestarts)},
	}
	if d.User != "" {
		checks = append(checks, struct {
			key string
			err error
		}{"user", specrules.User(d.User)})
	}
	for _, c := range checks {
		if c.err != nil {
			return fmt.Errorf("cannot use spec: %s.%s: %w", p, c.key, c.err)
		}
	}
	if err := validateEnv(p+".env", d.Env); err != nil {
		return err
	}
	if errs := specrules.After(d.Name, d.After, declared); len(errs) > 0 {
		return fmt.Errorf("cannot use spec: %s.after: %w", p, errs[0])
	}
	if d.Oneshot {
		if errs := specrules.Oneshot(d.Ready != nil, d.Restart, *d.MaxRestarts); len(errs) > 0 {
			return fmt.Errorf("cannot use spec: %s.%s: %w", p, errs[0].Key, errs[0].Err)
		}
	}
	if d.Ready != nil {
		if err := d.Ready.validate(p + ".ready"); err != nil {
			return err
		}
	}
	return nil
}

func (r *Ready) validate(p string) error {
	if errs := specrules.Ready(r.TCP, r.HTTP, r.Cmd, r.Log); len(errs) > 0 {
		if e := errs[0]; e.Key != "" {
			return fmt.Errorf("cannot use spec: %s.%s: %w", p, e.Key, e.Err)
		}
		return fmt.Errorf("cannot use spec: %s: %w", p, errs[0].Err)
	}
	if e := specrules.ReadyExchange(r.TCP, r.Send, r.Expect); e.Err != nil {
		return fmt.Errorf("cannot use spec: %s.%s: %w", p, e.Key, e.Err)
	}
	if e := specrules.Duration(r.Timeout); e != nil {
		return fmt.Errorf("cannot use spec: %s.timeout: %w", p, e)
	}
	return nil
}

// timeout returns the parsed readiness timeout (validated before).
func (r *Ready) timeout() time.Duration {
	d, _ := time.ParseDuration(r.Timeout)
	return d
}

// describe names the check the way error messages show it: "tcp 127.0.0.1:6379".
func (r *Ready) describe() string {
	switch {
	case r.TCP != "":
		d := "tcp " + r.TCP
		if r.Send != "" {
			d += ", sending " + strconv.Quote(r.Send)
		}
		if r.Expect != "" {
			d += ", expecting " + strconv.Quote(r.Expect)
		}
		return d
	case r.HTTP != "":
		return "http " + r.HTTP
	case len(r.Cmd) > 0:
		return "cmd " + strings.Join(r.Cmd, " ")
	default:
		return "log " + strconv.Quote(r.Log)
	}
}

// validateEnv checks each entry. A name may repeat: entries apply in order,
// so a later one (say, from `airlock run -e`) replaces an earlier one.
func validateEnv(p string, env []EnvEntry) error {
	if err := checkEnv(p, env); err != nil {
		return fmt.Errorf("cannot use spec: %w", err)
	}
	return nil
}

// checkEnv checks each entry of env, named p in the error.
func checkEnv(p string, env []EnvEntry) error {
	for i, e := range env {
		if err := specrules.EnvName(e.Name); err != nil {
			return fmt.Errorf("%s[%d].name %q: %w", p, i, e.Name, err)
		}
		if (e.Value == nil) == (e.Secret == "") {
			return fmt.Errorf("%s.%s needs exactly one of value or secret", p, e.Name)
		}
	}
	return nil
}

// checkEndMarker checks an end marker: empty, or at most 64 letters and digits.
func checkEndMarker(m string) error {
	if m != "" && (len(m) > 64 || strings.Trim(m, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") != "") {
		return errors.New("end_marker: at most 64 letters and digits")
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
