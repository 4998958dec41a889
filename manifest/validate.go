package manifest

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

var (
	entryNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	memoryRE    = regexp.MustCompile(`^(?i)([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?b)?$`)
)

// validator collects every problem of a merged, defaulted manifest.
type validator struct {
	origins map[string]origin
	errs    Errors
}

func (v *validator) errorf(path []string, format string, args ...any) {
	v.errs = append(v.errs, locate(v.origins, path, fmt.Sprintf(format, args...)))
}

func validate(m *Manifest, origins map[string]origin) Errors {
	v := &validator{origins: origins}
	for _, t := range m.Tools {
		if !slices.Contains(Tools, t) {
			v.errorf([]string{"tools"}, "unknown tool %q (known tools: %s)", t, strings.Join(Tools, ", "))
		}
	}
	v.sandbox(&m.Sandbox)
	v.env([]string{"env"}, m.Env)
	targets := map[string]string{}
	for _, name := range sortedKeys(m.Mounts) {
		v.mount(name, m.Mounts[name], targets)
	}
	for _, name := range sortedKeys(m.Copies) {
		v.copy(name, m.Copies[name], targets)
	}
	for _, name := range sortedKeys(m.Daemons) {
		v.daemon(name, m.Daemons[name], m.Daemons)
	}
	v.afterCycles(m.Daemons)
	for _, name := range sortedKeys(m.Services) {
		v.service(name, m.Services[name])
	}
	return v.errs
}

func (v *validator) sandbox(s *Sandbox) {
	p := func(k string) []string { return []string{"sandbox", k} }
	if s.Image == "" && s.Build == nil {
		v.errorf(p("image"), "is required unless [sandbox.build] is given")
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
	if s.Workdir != "" && !path.IsAbs(s.Workdir) {
		v.errorf(p("workdir"), "must be an absolute path, got %q", s.Workdir)
	}
	if len(s.Shell) > 0 && s.Shell[0] == "" {
		v.errorf(p("shell"), "the first element (the program) must not be empty")
	}
	if !slices.Contains(ProjectModes, s.Project) {
		v.errorf(p("project"), "unknown project mode %q (use one of %s)", s.Project, strings.Join(ProjectModes, ", "))
	}
	if !slices.Contains(Networks, s.Network) {
		v.errorf(p("network"), "unknown network %q (use one of %s)", s.Network, strings.Join(Networks, ", "))
	}
	v.duration(p("ready_timeout"), s.ReadyTimeout)
	if s.CPUs < 0 {
		v.errorf(p("cpus"), "must not be negative, got %g", s.CPUs)
	}
	if s.Memory != "" {
		if _, err := ParseMemory(s.Memory); err != nil {
			v.errorf(p("memory"), "%v", err)
		}
	}
}

// ParseMemory reads a size such as "512m", "2g" or "1.5GiB" into bytes.
func ParseMemory(s string) (int64, error) {
	m := memoryRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("invalid size %q (use a number with an optional unit k, m, g or t, e.g. \"512m\")", s)
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	mult := map[string]float64{"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[strings.ToLower(m[2])]
	return int64(n * mult), nil
}

func (v *validator) duration(path []string, s string) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		v.errorf(path, "invalid duration %q (use a Go duration such as \"30s\" or \"2m\")", s)
	case d <= 0:
		v.errorf(path, "must be positive, got %q", s)
	}
}

func (v *validator) env(prefix []string, vars map[string]string) {
	for _, k := range sortedKeys(vars) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			v.errorf(append(append([]string{}, prefix...), k), "invalid variable name (it must not be empty or contain = or NUL)")
		}
	}
}

func (v *validator) entryName(sec, name string) bool {
	if !entryNameRE.MatchString(name) {
		v.errorf([]string{sec, name}, "invalid name (use letters, digits, '_', '.' and '-', starting with a letter or digit)")
		return false
	}
	return true
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
	targets[clean] = keyPath(sec, name)
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
	if len(d.Command) == 0 || d.Command[0] == "" {
		v.errorf(p("command"), "is required: the program and its arguments, e.g. [\"redis-server\"]")
	}
	if !path.IsAbs(d.Cwd) {
		v.errorf(p("cwd"), "must be an absolute path, got %q", d.Cwd)
	}
	if !slices.Contains(Signals, d.Signal) {
		v.errorf(p("signal"), "unknown signal %q (use one of %s)", d.Signal, strings.Join(Signals, ", "))
	}
	if d.Timeout < 0 {
		v.errorf(p("timeout"), "must not be negative (0 waits forever), got %d", d.Timeout)
	}
	if !slices.Contains(RestartPolicies, d.Restart) {
		v.errorf(p("restart"), "unknown policy %q (use one of %s)", d.Restart, strings.Join(RestartPolicies, ", "))
	}
	if d.MaxRestarts < 0 {
		v.errorf(p("max_restarts"), "must not be negative (0 means no limit), got %d", d.MaxRestarts)
	}
	for _, a := range d.After {
		switch _, ok := all[a]; {
		case a == name:
			v.errorf(p("after"), "a daemon cannot wait for itself")
		case !ok:
			v.errorf(p("after"), "unknown daemon %q (declared daemons: %s)", a, strings.Join(sortedKeys(all), ", "))
		}
	}
	if d.Ready != nil {
		v.ready(p("ready"), d.Ready)
	}
	v.env(p("env"), d.Env)
}

func (v *validator) ready(p []string, r *Ready) {
	at := func(k string) []string { return append(append([]string{}, p...), k) }
	var kinds []string
	if r.TCP != "" {
		kinds = append(kinds, "tcp")
		host, port, err := net.SplitHostPort(r.TCP)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			v.errorf(at("tcp"), "invalid address %q (use host:port, e.g. \"127.0.0.1:6379\")", r.TCP)
		}
	}
	if r.HTTP != "" {
		kinds = append(kinds, "http")
		u, err := url.Parse(r.HTTP)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.errorf(at("http"), "invalid URL %q (use http://host:port/path)", r.HTTP)
		}
	}
	if r.Cmd != nil {
		kinds = append(kinds, "cmd")
		if len(r.Cmd) == 0 || r.Cmd[0] == "" {
			v.errorf(at("cmd"), "must name a program, e.g. [\"redis-cli\", \"ping\"]")
		}
	}
	if r.Log != "" {
		kinds = append(kinds, "log")
		if _, err := regexp.Compile(r.Log); err != nil {
			v.errorf(at("log"), "invalid regular expression: %v", err)
		}
	}
	switch len(kinds) {
	case 0:
		v.errorf(p, "needs exactly one check: tcp, http, cmd or log")
	case 1:
	default:
		v.errorf(p, "sets %s; set exactly one check", strings.Join(kinds, " and "))
	}
	v.duration(at("timeout"), r.Timeout)
}

// afterCycles reports each cycle of `after` once, naming the chain.
func (v *validator) afterCycles(daemons map[string]Daemon) {
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(string)
	visit = func(n string) {
		state[n] = visiting
		stack = append(stack, n)
		for _, a := range daemons[n].After {
			if _, ok := daemons[a]; !ok || a == n {
				continue
			}
			switch state[a] {
			case unvisited:
				visit(a)
			case visiting:
				i := slices.Index(stack, a)
				chain := append(append([]string{}, stack[i:]...), a)
				v.errorf([]string{"daemons", a, "after"}, "cycle: %s", strings.Join(chain, " -> "))
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
	}
	for _, n := range sortedKeys(daemons) {
		if state[n] == unvisited {
			visit(n)
		}
	}
}

func (v *validator) service(name string, s Service) {
	if !v.entryName("services", name) {
		return
	}
	p := func(k ...string) []string { return append([]string{"services", name}, k...) }
	if s.Image == "" {
		v.errorf(p("image"), "is required")
	}
	if h := s.Healthcheck; h != nil {
		if len(h.Cmd) == 0 || h.Cmd[0] == "" {
			v.errorf(p("healthcheck", "cmd"), "is required: the probe's program and arguments, e.g. [\"pg_isready\"]")
		}
		v.duration(p("healthcheck", "interval"), h.Interval)
		v.duration(p("healthcheck", "timeout"), h.Timeout)
		if h.Retries < 0 {
			v.errorf(p("healthcheck", "retries"), "must not be negative, got %d", h.Retries)
		}
	}
	v.env(p("env"), s.Env)
}
