package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// SpecVersion is the only spec format version this supervisor reads.
const SpecVersion = 1

// Defaults of the spec, the same as the manifest's (DESIGN §3), so a spec
// written by hand may leave them out.
const (
	DefaultLogDir       = "/airlock/daemons"
	DefaultStatusFile   = "/airlock/status.jsonl"
	DefaultSignal       = "SIGTERM"
	DefaultTimeout      = 10
	DefaultRestart      = RestartAlways
	DefaultMaxRestarts  = 10
	DefaultReadyTimeout = 30 * time.Second
	DefaultDaemonCwd    = "/"
)

// Restart policies.
const (
	RestartAlways    = "always"
	RestartOnFailure = "on-failure"
)

// maxSpecSize bounds the spec file the supervisor is willing to read.
const maxSpecSize = 4 << 20

// Bounds of a spec's numbers, the same as the manifest's (manifest.MaxDuration,
// manifest.MaxDaemonTimeout, manifest.MaxCount), so that every spec made from a
// valid manifest is accepted and no value wraps around when it becomes a
// time.Duration.
const (
	// MaxTimeout bounds a daemon's timeout, in seconds: a year.
	MaxTimeout = 365 * 24 * 60 * 60
	// MaxRestarts bounds a daemon's max_restarts.
	MaxRestarts = 10000
	// MaxReadyTimeout bounds a readiness check's timeout: a year.
	MaxReadyTimeout = 365 * 24 * time.Hour
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
	StatusReadFile string    `json:"status_read_file,omitempty"`
	Main           Main      `json:"main"`
	Daemons        []*Daemon `json:"daemons,omitempty"`
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
}

// Ready is a daemon's readiness check: exactly one of TCP, HTTP, Cmd or Log.
type Ready struct {
	TCP     string   `json:"tcp,omitempty"`
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

var (
	daemonNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

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
// "cannot …" error naming the field.
func (s *Spec) Validate() error {
	if len(s.Main.Argv) > 0 && s.Main.Argv[0] == "" {
		return errors.New("cannot use spec: main.argv[0] is empty")
	}
	if err := validateEnv("main.env", s.Main.Env); err != nil {
		return err
	}
	if s.Main.User != "" && !userSpecRE.MatchString(s.Main.User) {
		return fmt.Errorf("cannot use spec: main.user %q is not USER or USER:GROUP", s.Main.User)
	}
	byName := make(map[string]*Daemon, len(s.Daemons))
	for i, d := range s.Daemons {
		if d == nil {
			return fmt.Errorf("cannot use spec: daemons[%d] is null", i)
		}
		if !daemonNameRE.MatchString(d.Name) {
			return fmt.Errorf("cannot use spec: daemons[%d].name %q is not a valid daemon name", i, d.Name)
		}
		if byName[d.Name] != nil {
			return fmt.Errorf("cannot use spec: daemon %s is defined twice", d.Name)
		}
		byName[d.Name] = d
	}
	for _, d := range s.Daemons {
		if err := d.validate(byName); err != nil {
			return err
		}
	}
	if cycle := findCycle(s.Daemons, byName); cycle != nil {
		return fmt.Errorf("cannot order daemons: cycle in after: %s", strings.Join(cycle, " -> "))
	}
	return nil
}

func (d *Daemon) validate(byName map[string]*Daemon) error {
	p := "daemons." + d.Name
	if len(d.Command) == 0 || d.Command[0] == "" {
		return fmt.Errorf("cannot use spec: %s.command is empty", p)
	}
	if _, ok := signalByName(d.Signal); !ok {
		return fmt.Errorf("cannot use spec: %s.signal: unknown signal %q", p, d.Signal)
	}
	if *d.Timeout < 0 {
		return fmt.Errorf("cannot use spec: %s.timeout is negative", p)
	}
	if *d.Timeout > MaxTimeout {
		return fmt.Errorf("cannot use spec: %s.timeout is more than %d seconds (a year)", p, MaxTimeout)
	}
	if d.Restart != RestartAlways && d.Restart != RestartOnFailure {
		return fmt.Errorf("cannot use spec: %s.restart: unknown policy %q (want always or on-failure)", p, d.Restart)
	}
	if *d.MaxRestarts < 0 {
		return fmt.Errorf("cannot use spec: %s.max_restarts is negative", p)
	}
	if *d.MaxRestarts > MaxRestarts {
		return fmt.Errorf("cannot use spec: %s.max_restarts is more than %d", p, MaxRestarts)
	}
	if d.User != "" && !userSpecRE.MatchString(d.User) {
		return fmt.Errorf("cannot use spec: %s.user %q is not USER or USER:GROUP", p, d.User)
	}
	if err := validateEnv(p+".env", d.Env); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, a := range d.After {
		if byName[a] == nil {
			return fmt.Errorf("cannot use spec: %s.after: unknown daemon %q", p, a)
		}
		if seen[a] {
			return fmt.Errorf("cannot use spec: %s.after names %q twice", p, a)
		}
		seen[a] = true
	}
	if d.Ready != nil {
		if err := d.Ready.validate(p + ".ready"); err != nil {
			return err
		}
	}
	return nil
}

func (r *Ready) validate(p string) error {
	n := 0
	if r.TCP != "" {
		n++
		if _, port, err := net.SplitHostPort(r.TCP); err != nil || port == "" {
			return fmt.Errorf("cannot use spec: %s.tcp %q is not host:port", p, r.TCP)
		}
	}
	if r.HTTP != "" {
		n++
		u, err := url.Parse(r.HTTP)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("cannot use spec: %s.http %q is not an http(s) URL", p, r.HTTP)
		}
	}
	if len(r.Cmd) > 0 {
		n++
		if r.Cmd[0] == "" {
			return fmt.Errorf("cannot use spec: %s.cmd has an empty program", p)
		}
	}
	if r.Log != "" {
		n++
		if _, err := regexp.Compile(r.Log); err != nil {
			return fmt.Errorf("cannot use spec: %s.log: %w", p, err)
		}
	}
	if n != 1 {
		return fmt.Errorf("cannot use spec: %s needs exactly one of tcp, http, cmd or log (has %d)", p, n)
	}
	d, err := time.ParseDuration(r.Timeout)
	if err != nil || d <= 0 {
		return fmt.Errorf("cannot use spec: %s.timeout %q is not a positive duration", p, r.Timeout)
	}
	if d > MaxReadyTimeout {
		return fmt.Errorf("cannot use spec: %s.timeout %q is more than a year", p, r.Timeout)
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
		return "tcp " + r.TCP
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
	for i, e := range env {
		if !envNameRE.MatchString(e.Name) {
			return fmt.Errorf("cannot use spec: %s[%d].name %q is not a valid variable name", p, i, e.Name)
		}
		if (e.Value == nil) == (e.Secret == "") {
			return fmt.Errorf("cannot use spec: %s.%s needs exactly one of value or secret", p, e.Name)
		}
	}
	return nil
}

// findCycle returns the names of one cycle in the after graph, first name
// repeated at the end, or nil.
func findCycle(daemons []*Daemon, byName map[string]*Daemon) []string {
	const (
		unvisited = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(n string) []string
	visit = func(n string) []string {
		switch state[n] {
		case onPath:
			for i, p := range path {
				if p == n {
					return append(append([]string{}, path[i:]...), n)
				}
			}
		case done:
			return nil
		}
		state[n] = onPath
		path = append(path, n)
		for _, a := range byName[n].After {
			if c := visit(a); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	for _, d := range daemons {
		if c := visit(d.Name); c != nil {
			return c
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
