package manifest

import (
	"fmt"
	"maps"
	"math"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/manifest/specrules"
)

var (
	memoryRE = regexp.MustCompile(`^(?i)([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?b)?$`)
	// entryNameRE is specrules' pattern of entry names, for the schema.
	entryNameRE = regexp.MustCompile(specrules.EntryNamePattern)
)

// Bounds of the numbers a manifest may hold: what the Engine and the supervisor
// accept, so an absurd value is a config error rather than a wrap-around. The
// rules of what becomes the supervisor's spec (names, bounds, signals, users,
// durations, ready checks, after) are package specrules, which the supervisor
// applies to its spec too.
const (
	// MaxCPUs bounds sandbox.cpus; MinCPUs is the Engine's smallest limit.
	MinCPUs = 0.01
	MaxCPUs = 1024
	// MinMemory is the Engine's smallest memory limit; MaxMemory is 1 PiB.
	MinMemory = 6 << 20
	MaxMemory = 1 << 50
	// MaxDuration bounds every duration (ready timeouts, healthcheck interval
	// and timeout): a year.
	MaxDuration = specrules.MaxDuration
	// MaxDaemonTimeout bounds daemons.*.timeout, in seconds: a year.
	MaxDaemonTimeout = specrules.MaxDaemonTimeout
	// MaxCount bounds daemons.*.max_restarts and services.*.healthcheck.retries.
	MaxCount = specrules.MaxCount
	// MaxNameLength bounds entry names: daemon names name log folders in the
	// supervisor, service names become host names (a DNS label).
	MaxNameLength = specrules.MaxNameLength
)

// validator collects every problem of a merged, defaulted manifest.
type validator struct {
	origins map[string]origin
	errs    Errors
	// servicePorts are the loopback ports services.*.ports forward, by service.
	servicePorts map[int]string
}

func (v *validator) errorf(path []string, format string, args ...any) {
	v.errs = append(v.errs, locate(v.origins, path, fmt.Sprintf(format, args...)))
}

func validate(m *Manifest, origins map[string]origin) Errors {
	v := &validator{origins: origins}
	for _, t := range m.Tools {
		if _, ok := CanonicalTool(t); !ok {
			v.errorf([]string{"tools"}, "unknown tool %q (known tools: %s)", t, strings.Join(Tools, ", "))
		}
	}
	v.sandbox(&m.Sandbox)
	v.processEnv([]string{"env"}, m.Env)
	targets := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(m.Mounts)) {
		v.mount(name, m.Mounts[name], targets)
	}
	for _, name := range slices.Sorted(maps.Keys(m.Copies)) {
		v.copy(name, m.Copies[name], targets)
	}
	for _, name := range slices.Sorted(maps.Keys(m.Daemons)) {
		v.daemon(name, m.Daemons[name], m.Daemons)
	}
	v.afterCycles(m.Daemons)
	for _, name := range slices.Sorted(maps.Keys(m.Services)) {
		v.service(name, m.Services[name], m.Services)
	}
	v.serviceCycles(m.Services)
	v.noNUL(nil, reflect.ValueOf(m).Elem())
	return v.errs
}

// Validate checks a resolved manifest with the rules Load applies, for a
// manifest that did not come through Load: the control daemon checks what a
// client sends (restored with its values, see Restore) before it accepts it.
// The problems are Errors, as Load's, each naming its key path.
func (r *Resolved) Validate() error {
	m := r.Manifest
	errs := validate(&m, r.origins)
	errs = append(errs, checkSubstituted(&m, r.Sources, r.origins, nil)...)
	return errs.orNil()
}

// checkSubstituted checks what substitution produced: a value from the vault
// cannot be a host path (mounts.*.source, copies.*.source), since paths show in
// messages (a missing source, missing = "warn") and in the container's
// configuration, nor the image (sandbox.image), which the primary's
// configuration holds as it is (docker inspect's Config.Image); the other keys
// substitution applies to are env values, delivered privately (design.md §5). Right
// after substitution (vaultNames, which names the vault variables each key used,
// is not nil then), no substituted value may hold a NUL byte either (validation
// saw the templates only).
func checkSubstituted(m *Manifest, sources map[string]Source, origins map[string]origin, vaultNames map[string][]string) Errors {
	var errs Errors
	if vaultNames != nil {
		c := *m
		walkSubstituted(&c, func(path []string, val string) string {
			if strings.IndexByte(val, 0) >= 0 {
				errs = append(errs, locate(origins, path, "must not contain a NUL byte (after substitution)"))
			}
			return val
		})
	}
	if p := []string{"sandbox", "image"}; sources[KeyPath(p...)] == Vault {
		msg := "a vault value cannot be used in an image reference (it would show in docker inspect); use an environment variable"
		if names := vaultNames[KeyPath(p...)]; len(names) > 0 {
			verb := " comes"
			if len(names) > 1 {
				verb = " come"
			}
			msg = "${" + strings.Join(names, "}, ${") + "}" + verb + " from the vault: " + msg
		}
		errs = append(errs, locate(origins, p, msg))
	}
	for _, sec := range []string{"mounts", "copies"} {
		var names []string
		if sec == "mounts" {
			names = slices.Sorted(maps.Keys(m.Mounts))
		} else {
			names = slices.Sorted(maps.Keys(m.Copies))
		}
		for _, name := range names {
			if p := []string{sec, name, "source"}; sources[KeyPath(p...)] == Vault {
				errs = append(errs, locate(origins, p, "a value from the vault cannot be used in a host path (it would show in messages); use an environment variable"))
			}
		}
	}
	return errs
}

// noNUL reports each string of the manifest that holds a NUL byte: no
// argument, path, name or environment value can carry one to a process, a file
// or the Engine. Names (map keys) are left to the checks of each kind of name.
func (v *validator) noNUL(path []string, val reflect.Value) {
	switch val.Kind() {
	case reflect.String:
		if strings.IndexByte(val.String(), 0) >= 0 {
			v.errorf(path, "must not contain a NUL byte")
		}
	case reflect.Slice:
		for i := 0; i < val.Len(); i++ {
			if strings.IndexByte(val.Index(i).String(), 0) >= 0 {
				v.errorf(path, "must not contain a NUL byte (element %d)", i)
				return
			}
		}
	case reflect.Map:
		keys := val.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			v.noNUL(append(append([]string{}, path...), k.String()), val.MapIndex(k))
		}
	case reflect.Pointer:
		if !val.IsNil() {
			v.noNUL(path, val.Elem())
		}
	case reflect.Struct:
		t := val.Type()
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
			v.noNUL(append(append([]string{}, path...), name), val.Field(i))
		}
	}
}

func (v *validator) sandbox(s *Sandbox) {
	p := func(k string) []string { return []string{"sandbox", k} }
	if s.Image == "" && s.Build == nil {
		v.errorf(p("image"), "is required unless [sandbox.build] is given")
	}
	if s.User != "" {
		v.check(p("user"), specrules.User(s.User))
	}
	if s.Pool != nil {
		pp := func(k string) []string { return []string{"sandbox", "pool", k} }
		if s.Pool.Size < 0 || s.Pool.Size > MaxPoolSize {
			v.errorf(pp("size"), "must be between 0 and %d (got %d)", MaxPoolSize, s.Pool.Size)
		}
		v.duration(pp("idle_ttl"), s.Pool.IdleTTL)
	}
	if s.Egress != nil {
		for _, a := range s.Egress.Allow {
			if _, err := egress.ParseRule(a); err != nil {
				v.errorf([]string{"sandbox", "egress", "allow"}, "%v", err)
			}
		}
		if s.Egress.Network == "" {
			v.errorf([]string{"sandbox", "egress", "network"}, "must not be empty")
		}
		if s.Network != "bridge" {
			v.errorf(p("network"), "must be \"bridge\" with [sandbox.egress] (got %q): the egress proxy is the sandbox's only way out", s.Network)
		}
	}
	if s.Build != nil {
		if s.Build.Context == "" {
			v.errorf([]string{"sandbox", "build", "context"}, "must not be empty")
		}
		if s.Build.Dockerfile == "" {
			v.errorf([]string{"sandbox", "build", "dockerfile"}, "must not be empty")
		}
		v.env([]string{"sandbox", "build", "args"}, s.Build.Args)
	}
	if s.Workdir != "" && !path.IsAbs(s.Workdir) && (s.Workdir == ".." || strings.HasPrefix(path.Clean(s.Workdir), "../")) {
		v.errorf(p("workdir"), "must be an absolute path, or a path in the project dir (relative to it), got %q", s.Workdir)
	}
	if len(s.Shell) > 0 && s.Shell[0] == "" {
		v.errorf(p("shell"), "the first element (the program) must not be empty")
	}
	v.check(p("path_prepend"), specrules.PathDirs(s.PathPrepend))
	if !slices.Contains(ProjectModes, s.Project) {
		v.errorf(p("project"), "unknown project mode %q (use one of %s)", s.Project, strings.Join(ProjectModes, ", "))
	}
	if !slices.Contains(Networks, s.Network) {
		v.errorf(p("network"), "unknown network %q (use one of %s)", s.Network, strings.Join(Networks, ", "))
	}
	v.ports(s)
	v.capabilities(s)
	v.duration(p("ready_timeout"), s.ReadyTimeout)
	switch {
	case math.IsNaN(s.CPUs) || math.IsInf(s.CPUs, 0):
		v.errorf(p("cpus"), "must be a finite number, got %g", s.CPUs)
	case s.CPUs < 0:
		v.errorf(p("cpus"), "must not be negative, got %g", s.CPUs)
	case s.CPUs != 0 && (s.CPUs < MinCPUs || s.CPUs > MaxCPUs):
		v.errorf(p("cpus"), "must be between %g and %d (0 means no limit), got %g", MinCPUs, MaxCPUs, s.CPUs)
	}
	if s.Memory != "" {
		if _, err := parseMemory(s.Memory); err != nil {
			v.errorf(p("memory"), "%v", err)
		}
	}
}

// ports checks sandbox.ports: each entry in Docker's syntax, and a network the
// Engine can publish from.
func (v *validator) ports(s *Sandbox) {
	p := []string{"sandbox", "ports"}
	if len(s.Ports) == 0 {
		return
	}
	switch {
	case s.Network == "none" || s.Network == "host":
		v.errorf(p, "cannot publish ports with sandbox.network = %q (publishing needs \"bridge\"; with \"host\" the sandbox's ports are the host's already)", s.Network)
	case s.Egress != nil:
		v.errorf(p, "cannot publish ports with [sandbox.egress]: the sandbox sits on an internal network, which the Engine publishes no port from")
	}
	if _, err := portMappings(s.Ports); err != nil {
		v.errorf(p, "%v", err)
	}
}

// capabilities checks sandbox.cap_add and sandbox.cap_drop: known names, and
// none in both.
func (v *validator) capabilities(s *Sandbox) {
	v.capList([]string{"sandbox", "cap_add"}, []string{"sandbox", "cap_drop"}, s.CapAdd, s.CapDrop)
	v.extraHosts([]string{"sandbox", "extra_hosts"}, s.ExtraHosts)
}

// capList checks a cap_add and a cap_drop list: known names, and none in both.
func (v *validator) capList(addPath, dropPath []string, capAdd, capDrop []string) {
	add, errAdd := NormalizeCapabilities(capAdd)
	if errAdd != nil {
		v.errorf(addPath, "%v", errAdd)
	}
	drop, errDrop := NormalizeCapabilities(capDrop)
	if errDrop != nil {
		v.errorf(dropPath, "%v", errDrop)
	}
	if errAdd != nil || errDrop != nil {
		return
	}
	for _, c := range drop {
		if slices.Contains(add, c) {
			v.errorf(dropPath, "%s is also in %s (name a capability in one of them)", strings.TrimPrefix(c, "CAP_"), KeyPath(addPath...))
		}
	}
}

// parseMemory reads a size such as "512m", "2g" or "1.5GiB" into bytes. 0 (no
// limit) or a size from 6m (the Engine's minimum) to 1024t (1 PiB).
func parseMemory(s string) (int64, error) {
	b, err := readSize(s, "512m")
	switch {
	case err != nil:
		return 0, err
	case b != 0 && b < MinMemory:
		return 0, fmt.Errorf("size %q is below the Engine's minimum of 6m (use 0 or \"\" for no limit)", s)
	}
	return b, nil
}

// parseSize reads a size such as "64m" or "1g" into bytes (shm_size, and
// parseMemory's): a number with an optional unit k, m, g or t, at most 1024t.
func parseSize(s string) (int64, error) { return readSize(s, "256m") }

// readSize is parseSize, its error giving example as an example.
func readSize(s, example string) (int64, error) {
	m := memoryRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("invalid size %q (use a number with an optional unit k, m, g or t, e.g. %q)", s, example)
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	b := n * map[string]float64{"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[strings.ToLower(m[2])]
	if b > MaxMemory {
		return 0, fmt.Errorf("size %q is above the maximum of 1024t (1 PiB)", s)
	}
	return int64(b), nil
}

// check reports err, when there is one, at path.
func (v *validator) check(path []string, err error) bool {
	if err != nil {
		v.errorf(path, "%v", err)
		return false
	}
	return true
}

func (v *validator) duration(path []string, s string) {
	v.check(path, specrules.Duration(s))
}

// env checks the names of a table of variables the Engine sets (services.*.env,
// sandbox.build.args).
func (v *validator) env(prefix []string, vars map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			v.errorf(append(append([]string{}, prefix...), k), "invalid variable name (it must not be empty or contain = or NUL)")
		}
	}
}

// processEnv checks the names of a table of variables the supervisor sets in a
// process's environment ([env], daemons.*.env): it takes what a shell can name.
func (v *validator) processEnv(prefix []string, vars map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		v.check(append(append([]string{}, prefix...), k), specrules.EnvName(k))
	}
}

func (v *validator) entryName(sec, name string) bool {
	return v.check([]string{sec, name}, specrules.EntryName(name))
}

func targetOK(t string) bool { return path.IsAbs(t) || t == "~" || strings.HasPrefix(t, "~/") }

// checkTarget reports targets that are not absolute, and targets used twice across
// mounts and copies.
func (v *validator) checkTarget(sec, name, target string, targets map[string]string) {
	p := []string{sec, name, "target"}
	switch {
	case target == "":
		v.errorf(p, "is required")
		return
	case !targetOK(target):
		v.errorf(p, "must be an absolute path (or start with ~/ for the sandbox user's home), got %q", target)
		return
	}
	clean := target
	if path.IsAbs(target) {
		clean = path.Clean(target)
	}
	if other, dup := targets[clean]; dup {
		v.errorf(p, "%s is also the target of %s", target, other)
		return
	}
	targets[clean] = KeyPath(sec, name)
}

func (v *validator) mount(name string, m Mount, targets map[string]string) {
	if !v.entryName("mounts", name) {
		return
	}
	p := func(k string) []string { return []string{"mounts", name, k} }
	if m.Source == "" {
		v.errorf(p("source"), "is required")
	}
	v.checkTarget("mounts", name, m.Target, targets)
	if !slices.Contains(MissingModes, m.Missing) {
		v.errorf(p("missing"), "unknown value %q (use one of %s)", m.Missing, strings.Join(MissingModes, ", "))
		return
	}
	creates := m.Missing == "create-dir" || m.Missing == "create-file"
	if m.CreateMode != "" {
		if !creates {
			v.errorf(p("create_mode"), "only applies with missing = \"create-dir\" or \"create-file\"")
		} else if n, err := strconv.ParseUint(m.CreateMode, 8, 32); err != nil || n > 0o7777 {
			v.errorf(p("create_mode"), "invalid mode %q (use octal digits such as \"755\")", m.CreateMode)
		}
	}
	if m.FileContent != "" && m.Missing != "create-file" {
		v.errorf(p("file_content"), "only applies with missing = \"create-file\"")
	}
}

func (v *validator) copy(name string, c Copy, targets map[string]string) {
	if !v.entryName("copies", name) {
		return
	}
	if c.Source == "" {
		v.errorf([]string{"copies", name, "source"}, "is required")
	}
	v.checkTarget("copies", name, c.Target, targets)
	for _, pat := range c.Exclude {
		if _, err := filepath.Match(pat, ""); err != nil || pat == "" {
			v.errorf([]string{"copies", name, "exclude"}, "invalid pattern %q", pat)
		}
	}
}

func (v *validator) daemon(name string, d Daemon, all map[string]Daemon) {
	if !v.entryName("daemons", name) {
		return
	}
	p := func(k ...string) []string { return append([]string{"daemons", name}, k...) }
	v.check(p("command"), specrules.Command(d.Command))
	v.check(p("cwd"), specrules.Cwd(d.Cwd))
	v.check(p("signal"), specrules.Signal(d.Signal))
	v.check(p("timeout"), specrules.DaemonTimeout(d.Timeout))
	v.check(p("restart"), specrules.Restart(d.Restart))
	v.check(p("max_restarts"), specrules.MaxRestarts(d.MaxRestarts))
	if d.User != "" {
		v.check(p("user"), specrules.User(d.User))
	}
	for _, err := range specrules.After(name, d.After, slices.Sorted(maps.Keys(all))) {
		v.check(p("after"), err)
	}
	if d.Oneshot {
		for _, e := range specrules.Oneshot(d.Ready != nil, d.Restart, d.MaxRestarts) {
			v.check(p(e.Key), e.Err)
		}
	}
	if d.Ready != nil {
		v.ready(p("ready"), d.Ready)
	}
	v.processEnv(p("env"), d.Env)
}

func (v *validator) ready(p []string, r *Ready) {
	at := func(k string) []string { return append(append([]string{}, p...), k) }
	for _, e := range specrules.Ready(r.TCP, r.HTTP, r.Cmd, r.Log) {
		if e.Key == "" {
			v.check(p, e.Err)
		} else {
			v.check(at(e.Key), e.Err)
		}
	}
	if e := specrules.ReadyExchange(r.TCP, r.Send, r.Expect); e.Err != nil {
		v.check(at(e.Key), e.Err)
	}
	v.duration(at("timeout"), r.Timeout)
}

// afterCycles reports each cycle of `after` once, naming the chain, at the
// after of the daemon the chain starts and ends with.
func (v *validator) afterCycles(daemons map[string]Daemon) {
	graph := make(map[string][]string, len(daemons))
	for n, d := range daemons {
		graph[n] = d.After
	}
	for _, c := range specrules.Cycles(graph) {
		v.errorf([]string{"daemons", c[0], "after"}, "cycle: %s", strings.Join(c, " -> "))
	}
}
