package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/manifest/specrules"
)

// The conditions of services.*.depends_on, as compose names them.
const (
	ServiceStarted               = "service_started"
	ServiceHealthy               = "service_healthy"
	ServiceCompletedSuccessfully = "service_completed_successfully"
)

// DependsOnConditions are the values of services.*.depends_on.
var DependsOnConditions = []string{ServiceStarted, ServiceHealthy, ServiceCompletedSuccessfully}

// DependsOn is services.*.depends_on: the services that must reach a condition
// before this one starts. TOML takes a table of conditions
// (`{ db = "service_healthy" }`) or, as compose's short form, an array of names
// (each service_started).
type DependsOn map[string]string

// UnmarshalTOML takes the table or the array.
func (d *DependsOn) UnmarshalTOML(v any) error {
	out, err := dependsOnFrom(v)
	if err != nil {
		return &selfDecodeError{err.Error()}
	}
	*d = out
	return nil
}

// UnmarshalJSON takes the table or the array, as the merged layers hold them.
func (d *DependsOn) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	out, err := dependsOnFrom(v)
	if err != nil {
		return err
	}
	*d = out
	return nil
}

func dependsOnFrom(v any) (DependsOn, error) {
	out := DependsOn{}
	switch v := v.(type) {
	case []any:
		for _, n := range v {
			s, ok := n.(string)
			if !ok {
				return nil, fmt.Errorf("wrong type: expected an array of service names or a table of conditions")
			}
			out[s] = ServiceStarted
		}
	case []string:
		for _, s := range v {
			out[s] = ServiceStarted
		}
	case map[string]any:
		for k, c := range v {
			s, ok := c.(string)
			if !ok {
				return nil, fmt.Errorf("wrong type: %s: expected a condition string (%s)", k, strings.Join(DependsOnConditions, ", "))
			}
			out[k] = s
		}
	case nil:
	default:
		return nil, fmt.Errorf("wrong type: expected an array of service names or a table of conditions")
	}
	return out, nil
}

// Ulimit is one entry of services.*.ulimits: soft and hard limits (-1: unlimited).
// TOML takes `{ soft = N, hard = M }` or, as compose's short form, one number for both.
type Ulimit struct {
	Soft int64 `toml:"soft" json:"soft"`
	Hard int64 `toml:"hard" json:"hard"`
}

// UnmarshalTOML takes the table or the number.
func (u *Ulimit) UnmarshalTOML(v any) error {
	if err := u.from(v); err != nil {
		return &selfDecodeError{err.Error()}
	}
	return nil
}

// UnmarshalJSON takes the table or the number.
func (u *Ulimit) UnmarshalJSON(b []byte) error {
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return err
	}
	return u.from(v)
}

func (u *Ulimit) from(v any) error {
	num := func(x any) (int64, bool) {
		switch n := x.(type) {
		case int64:
			return n, true
		case json.Number:
			i, err := n.Int64()
			return i, err == nil
		}
		return 0, false
	}
	if n, ok := num(v); ok {
		u.Soft, u.Hard = n, n
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("wrong type: expected an integer or a table { soft = N, hard = M }")
	}
	for k, x := range m {
		n, ok := num(x)
		switch {
		case k != "soft" && k != "hard":
			return fmt.Errorf("unknown key %q (a ulimit has soft and hard)", k)
		case !ok:
			return fmt.Errorf("%s: wrong type: expected an integer", k)
		case k == "soft":
			u.Soft = n
		default:
			u.Hard = n
		}
	}
	_, hasSoft := m["soft"]
	_, hasHard := m["hard"]
	if !hasSoft || !hasHard {
		return fmt.Errorf("needs both soft and hard (or one number for both)")
	}
	return nil
}

// UlimitNames are the resource names the Engine takes in ulimits.
var UlimitNames = []string{"core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc", "rss", "rtprio", "rttime", "sigpending", "stack"}

// ServiceVolume is one entry of services.*.volumes, in compose's short syntax
// SOURCE:TARGET[:MODE] or TARGET.
type ServiceVolume struct {
	// Kind is "bind" (a source that is a path: ./x, ../x, /x, ~/x), "volume"
	// (a name: a volume made for the sandbox and removed with it) or
	// "anonymous" (no source).
	Kind     string
	Source   string // a path as written, or a volume name
	Target   string
	ReadOnly bool
}

var volumeNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// parseServiceVolume reads one services.*.volumes entry.
func parseServiceVolume(s string) (ServiceVolume, error) {
	parts := strings.Split(s, ":")
	var v ServiceVolume
	switch len(parts) {
	case 1:
		v = ServiceVolume{Kind: "anonymous", Target: parts[0]}
	case 2, 3:
		v = ServiceVolume{Source: parts[0], Target: parts[1]}
		if len(parts) == 3 {
			switch parts[2] {
			case "ro":
				v.ReadOnly = true
			case "rw":
			default:
				return v, fmt.Errorf("%q: unknown mode %q (use ro or rw)", s, parts[2])
			}
		}
		switch src := v.Source; {
		case src == "":
			return v, fmt.Errorf("%q: the source is empty", s)
		case src == "." || src == ".." || src == "~" || strings.HasPrefix(src, "./") || strings.HasPrefix(src, "../") || strings.HasPrefix(src, "/") || strings.HasPrefix(src, "~/"):
			v.Kind = "bind"
		case volumeNameRE.MatchString(src):
			v.Kind = "volume"
		default:
			return v, fmt.Errorf("%q: the source %q is neither a path (./dir, /dir, ~/dir) nor a volume name (letters, digits, _ . -)", s, src)
		}
	default:
		return v, fmt.Errorf("%q: use SOURCE:TARGET[:ro] or TARGET", s)
	}
	if !path.IsAbs(v.Target) {
		return v, fmt.Errorf("%q: the target %q must be an absolute path", s, v.Target)
	}
	return v, nil
}

// ServicePort is one entry of services.*.ports: the service's Port forwarded
// onto the sandbox's 127.0.0.1:Listen.
type ServicePort struct {
	Listen, Port int
}

// The values of services.*.loopback.
const (
	// LoopbackShared runs the service in the sandbox's network namespace.
	LoopbackShared = "shared"
	// LoopbackForwarded keeps the service in a namespace of its own, its
	// ports forwarded onto the sandbox's loopback.
	LoopbackForwarded = "forwarded"
)

// SharesLoopback reports whether the service runs in the sandbox's network
// namespace: loopback = "shared", or unset with ports that all keep their
// numbers (a namespace shared cannot move one) and no extra_hosts (it has
// the sandbox's /etc/hosts).
func (s Service) SharesLoopback() bool {
	switch s.Loopback {
	case LoopbackShared:
		return true
	case LoopbackForwarded:
		return false
	}
	return len(s.Ports) > 0 && s.cannotShareLoopback() == ""
}

// cannotShareLoopback says why the service cannot run in the sandbox's
// network namespace, or "".
func (s Service) cannotShareLoopback() string {
	for _, e := range s.Ports {
		if p, err := parseServicePort(e); err == nil && p.Listen != p.Port {
			return fmt.Sprintf("keeps a port's number: ports entry %q moves %d to %d", e, p.Port, p.Listen)
		}
	}
	if len(s.ExtraHosts) > 0 {
		return "takes the sandbox's /etc/hosts: extra_hosts cannot be set"
	}
	return ""
}

// parseServicePort reads one services.*.ports entry, in compose's syntax:
// PORT, LISTEN:PORT or 127.0.0.1:LISTEN:PORT, with an optional /tcp.
func parseServicePort(s string) (ServicePort, error) {
	spec := strings.TrimSuffix(s, "/tcp")
	if strings.Contains(spec, "/") {
		return ServicePort{}, fmt.Errorf("%q: only tcp ports are forwarded", s)
	}
	parts := strings.Split(spec, ":")
	if len(parts) == 3 {
		if ip := net.ParseIP(strings.Trim(parts[0], "[]")); parts[0] != "" && (ip == nil || !(ip.IsLoopback() || ip.IsUnspecified())) {
			return ServicePort{}, fmt.Errorf("%q: a service's ports are forwarded onto the sandbox's 127.0.0.1, not %s", s, parts[0])
		}
		parts = parts[1:]
	}
	num := func(v string) (int, bool) {
		n, err := strconv.Atoi(v)
		return n, err == nil && n >= 1 && n <= 65535
	}
	switch len(parts) {
	case 1:
		p, ok := num(parts[0])
		if !ok {
			return ServicePort{}, fmt.Errorf("%q: not a port (1-65535; ranges are not forwarded)", s)
		}
		return ServicePort{Listen: p, Port: p}, nil
	case 2:
		l, ok1 := num(parts[0])
		p, ok2 := num(parts[1])
		if !ok1 || !ok2 {
			return ServicePort{}, fmt.Errorf("%q: not LISTEN:PORT (1-65535; ranges are not forwarded)", s)
		}
		return ServicePort{Listen: l, Port: p}, nil
	}
	return ServicePort{}, fmt.Errorf("%q: use PORT, LISTEN:PORT or 127.0.0.1:LISTEN:PORT", s)
}

// parseTmpfs reads one services.*.tmpfs entry: PATH or PATH:OPTIONS (options as
// mount takes them, such as size=64m,mode=1777).
func parseTmpfs(s string) (Tmpfs, error) {
	target, options, _ := strings.Cut(s, ":")
	if !path.IsAbs(target) {
		return Tmpfs{}, fmt.Errorf("%q: the path must be absolute", s)
	}
	return Tmpfs{Target: target, Options: options}, nil
}

var hostNameRE = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$`)

// parseExtraHost reads one extra_hosts entry, NAME:IP or NAME=IP (IP may be
// host-gateway, the Engine's address for the host, or an IPv6 address in
// brackets, which it drops).
func parseExtraHost(s string) (ExtraHost, error) {
	name, ip, ok := strings.Cut(s, "=")
	if !ok {
		name, ip, ok = strings.Cut(s, ":")
	}
	if !ok {
		return ExtraHost{}, fmt.Errorf("%q: use NAME:IP (or NAME=IP)", s)
	}
	if !hostNameRE.MatchString(name) || len(name) > 253 {
		return ExtraHost{}, fmt.Errorf("%q: %q is not a host name", s, name)
	}
	if ip != "host-gateway" && net.ParseIP(strings.Trim(ip, "[]")) == nil {
		return ExtraHost{}, fmt.Errorf("%q: %q is not an IP address (or host-gateway)", s, ip)
	}
	return ExtraHost{Name: name, IP: strings.Trim(ip, "[]")}, nil
}

// service checks one [services.<name>] entry; all is every service, for depends_on.
func (v *validator) service(name string, s Service, all map[string]Service) {
	if !v.entryName("services", name) {
		return
	}
	p := func(k ...string) []string { return append([]string{"services", name}, k...) }
	if s.Image == "" {
		v.errorf(p("image"), "is required")
	}
	if s.Healthcheck != nil {
		v.healthcheck(p, s.Healthcheck)
	}
	v.serviceProcess(p, s)
	v.serviceNetworkNames(p, s)
	v.serviceMounts(p, s)
	v.capList(p("cap_add"), p("cap_drop"), s.CapAdd, s.CapDrop)
	v.servicePortList(name, p, s.Ports)
	v.serviceLoopback(p, s)
	v.ulimits(p, s.Ulimits)
	v.dependsOn(name, p, s.DependsOn, all)
}

// entryKey is the path of a key of one entry: its section and name, then k.
type entryKey func(k ...string) []string

// healthcheck checks a service's [healthcheck].
func (v *validator) healthcheck(p entryKey, h *Healthcheck) {
	if len(h.Cmd) == 0 || h.Cmd[0] == "" {
		v.errorf(p("healthcheck", "cmd"), "is required: the probe's program and arguments, e.g. [\"pg_isready\"]")
	}
	v.duration(p("healthcheck", "interval"), h.Interval)
	v.duration(p("healthcheck", "timeout"), h.Timeout)
	v.optionalDuration(p("healthcheck", "start_period"), h.StartPeriod)
	v.optionalDuration(p("healthcheck", "start_interval"), h.StartInterval)
	switch {
	case h.Retries < 0:
		v.errorf(p("healthcheck", "retries"), "must not be negative, got %d", h.Retries)
	case h.Retries > MaxCount:
		v.errorf(p("healthcheck", "retries"), "must be at most %d, got %d", MaxCount, h.Retries)
	}
}

// serviceProcess checks what a service's process is started with: env,
// entrypoint, user, working_dir, shm_size and env_file.
func (v *validator) serviceProcess(p entryKey, s Service) {
	v.env(p("env"), s.Env)
	if len(s.Entrypoint) > 0 && s.Entrypoint[0] == "" {
		v.errorf(p("entrypoint"), "the first element (the program) must not be empty")
	}
	if s.User != "" {
		v.check(p("user"), specrules.User(s.User))
	}
	if s.WorkingDir != "" && !path.IsAbs(s.WorkingDir) {
		v.errorf(p("working_dir"), "must be an absolute path, got %q", s.WorkingDir)
	}
	if s.ShmSize != "" {
		if _, err := parseSize(s.ShmSize); err != nil {
			v.errorf(p("shm_size"), "%v", err)
		}
	}
	for _, f := range s.EnvFile {
		if f == "" {
			v.errorf(p("env_file"), "an entry is empty")
		}
	}
}

// serviceNetworkNames checks a service's extra_hosts and aliases.
func (v *validator) serviceNetworkNames(p entryKey, s Service) {
	v.extraHosts(p("extra_hosts"), s.ExtraHosts)
	for _, a := range s.Aliases {
		if !hostNameRE.MatchString(a) || len(a) > 63 {
			v.errorf(p("aliases"), "%q is not a host name (letters, digits, '.', '_' and '-', at most 63 characters)", a)
		}
	}
}

// serviceMounts checks a service's volumes and tmpfs, no two of which may
// mount the same target.
func (v *validator) serviceMounts(p entryKey, s Service) {
	targets := map[string]string{}
	for _, e := range s.Volumes {
		vol, err := parseServiceVolume(e)
		if !v.check(p("volumes"), err) {
			continue
		}
		if prev, dup := targets[vol.Target]; dup {
			v.errorf(p("volumes"), "%q and %q both mount %s", prev, e, vol.Target)
		}
		targets[vol.Target] = e
	}
	for _, e := range s.Tmpfs {
		t, err := parseTmpfs(e)
		if !v.check(p("tmpfs"), err) {
			continue
		}
		if prev, dup := targets[t.Target]; dup {
			v.errorf(p("tmpfs"), "%q and %q both mount %s", prev, e, t.Target)
		}
		targets[t.Target] = e
	}
}

// servicePortList checks the ports of the service name: no loopback port may
// be forwarded to two services.
func (v *validator) servicePortList(name string, p entryKey, ports []string) {
	for _, e := range ports {
		sp, err := parseServicePort(e)
		if !v.check(p("ports"), err) {
			continue
		}
		if other, taken := v.servicePorts[sp.Listen]; taken {
			v.errorf(p("ports"), "%q: 127.0.0.1:%d is already forwarded to %s", e, sp.Listen, other)
			continue
		}
		if v.servicePorts == nil {
			v.servicePorts = map[int]string{}
		}
		v.servicePorts[sp.Listen] = name
	}
}

// serviceLoopback checks a service's loopback.
func (v *validator) serviceLoopback(p entryKey, s Service) {
	switch s.Loopback {
	case "", LoopbackForwarded:
	case LoopbackShared:
		if why := s.cannotShareLoopback(); why != "" {
			v.errorf(p("loopback"), "%q %s (or use %q)", LoopbackShared, why, LoopbackForwarded)
		}
	default:
		v.errorf(p("loopback"), "must be one of %q, %q, got %q", LoopbackShared, LoopbackForwarded, s.Loopback)
	}
}

// ulimits checks a service's ulimits, by name.
func (v *validator) ulimits(p entryKey, ulimits map[string]Ulimit) {
	for _, n := range slices.Sorted(maps.Keys(ulimits)) {
		u := ulimits[n]
		switch {
		case !slices.Contains(UlimitNames, n):
			v.errorf(p("ulimits", n), "unknown resource (use one of %s)", strings.Join(UlimitNames, ", "))
		case u.Soft < -1 || u.Hard < -1:
			v.errorf(p("ulimits", n), "must be -1 (unlimited) or more, got soft %d, hard %d", u.Soft, u.Hard)
		case u.Hard != -1 && (u.Soft == -1 || u.Soft > u.Hard):
			v.errorf(p("ulimits", n), "the soft limit %d is above the hard limit %d", u.Soft, u.Hard)
		}
	}
}

// dependsOn checks the depends_on of the service name, by dependency: each
// must be another service of all, whose condition it can meet.
func (v *validator) dependsOn(name string, p entryKey, deps DependsOn, all map[string]Service) {
	for _, dep := range slices.Sorted(maps.Keys(deps)) {
		cond := deps[dep]
		target, ok := all[dep]
		switch {
		case dep == name:
			v.errorf(p("depends_on"), "a service cannot depend on itself")
		case !ok:
			v.errorf(p("depends_on"), "%s is not a service of this manifest (services: %s)", dep, strings.Join(slices.Sorted(maps.Keys(all)), ", "))
		case !slices.Contains(DependsOnConditions, cond):
			v.errorf(p("depends_on", dep), "unknown condition %q (use one of %s)", cond, strings.Join(DependsOnConditions, ", "))
		case cond == ServiceHealthy && (target.Healthcheck == nil || len(target.Healthcheck.Cmd) == 0):
			v.errorf(p("depends_on", dep), "service_healthy needs a healthcheck on %s (add [services.%s.healthcheck], or use service_started)", dep, dep)
		case cond == ServiceCompletedSuccessfully && !target.Required:
			v.errorf(p("depends_on", dep), "service_completed_successfully needs %s to be required (an optional service's end gates nothing)", dep)
		}
	}
}

// serviceCycles reports each cycle of depends_on once.
func (v *validator) serviceCycles(services map[string]Service) {
	graph := make(map[string][]string, len(services))
	for n, s := range services {
		graph[n] = slices.Sorted(maps.Keys(s.DependsOn))
	}
	for _, c := range specrules.Cycles(graph) {
		v.errorf([]string{"services", c[0], "depends_on"}, "cycle: %s", strings.Join(c, " -> "))
	}
}

// optionalDuration checks a duration that may be empty or 0 (none).
func (v *validator) optionalDuration(path []string, s string) {
	if d, err := time.ParseDuration(s); s == "" || (err == nil && d == 0) {
		return
	}
	v.duration(path, s)
}

// extraHosts checks an extra_hosts list.
func (v *validator) extraHosts(p []string, hosts []string) {
	for _, h := range hosts {
		_, err := parseExtraHost(h)
		v.check(p, err)
	}
}

// maxEnvFile bounds an env_file.
const maxEnvFile = 1 << 20

// readEnvFiles reads every service's env_file into its env, below the values its
// env table sets (as compose: environment wins over env_file, a later file over
// an earlier one). A relative path starts at the folder of the file that names
// it, as compose's do.
func readEnvFiles(m *Manifest, origins map[string]origin, read func(string) ([]byte, error), check func(string) error) Errors {
	var errs Errors
	for _, name := range slices.Sorted(maps.Keys(m.Services)) {
		s := m.Services[name]
		if len(s.EnvFile) == 0 {
			continue
		}
		key := []string{"services", name, "env_file"}
		dir := ""
		if o, ok := origins[KeyPath(key...)]; ok && o.layer != nil {
			dir = o.layer.dir
		}
		fromFiles := map[string]string{}
		for _, f := range s.EnvFile {
			p := f
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			if check != nil {
				if err := check(p); err != nil {
					errs = append(errs, locate(origins, key, err.Error()))
					continue
				}
			}
			vars, err := readEnvFile(p, read)
			if err != nil {
				errs = append(errs, locate(origins, key, err.Error()))
				continue
			}
			maps.Copy(fromFiles, vars)
		}
		if s.Env == nil {
			s.Env = map[string]string{}
		}
		for k, val := range fromFiles {
			if _, set := s.Env[k]; !set {
				s.Env[k] = val
			}
		}
		m.Services[name] = s
	}
	return errs
}

// ReadEnvFile reads a file of NAME=VALUE lines as compose does: blank lines and
// lines starting with # are skipped, an "export " prefix is dropped, a value in
// matching single or double quotes loses them. Values are taken literally (no
// ${VAR}); a line without = is an error naming its line.
func ReadEnvFile(p string) (map[string]string, error) { return readEnvFile(p, os.ReadFile) }

func readEnvFile(p string, read func(string) ([]byte, error)) (map[string]string, error) {
	if fi, err := os.Stat(p); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("cannot read env file %s: not a regular file", p)
	} else if err == nil && fi.Size() > maxEnvFile {
		return nil, fmt.Errorf("cannot read env file %s: larger than %d bytes", p, maxEnvFile)
	}
	data, err := read(p)
	if err != nil {
		return nil, fmt.Errorf("cannot read env file: %w", err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxEnvFile)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, val, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\x00") {
			return nil, fmt.Errorf("%s:%d: not NAME=VALUE", p, n)
		}
		if len(val) >= 2 && (val[0] == '"' || val[0] == '\'') && val[len(val)-1] == val[0] {
			val = val[1 : len(val)-1]
		}
		out[k] = val
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read env file %s: %w", p, err)
	}
	return out, nil
}
