// Package userconfig reads and validates the user's config.toml (design.md §8):
// the control daemon's runtime settings, where exec output goes, and the
// vault's storage.
package userconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/distribution/reference"
	"github.com/docker/go-units"

	"github.com/airlock-dev/airlock/paths"
)

// Placeholders of artifacts.exec_output_template.
const (
	SandboxIDPlaceholder = "{sandbox_id}"
	ExecIDPlaceholder    = "{exec_id}"
)

// Backends are the values of runtime.backend (and --backend, AIRLOCK_BACKEND).
const (
	BackendDocker     = "docker"
	BackendKubernetes = "kubernetes"
)

// Backends lists the backend names, the default first.
var Backends = []string{BackendDocker, BackendKubernetes}

// Defaults of design.md §8.
const (
	DefaultBackend            = BackendDocker
	DefaultNamespace          = "airlock"
	DefaultIdleTTL            = 30 * time.Minute
	DefaultEventRetentionTTL  = 168 * time.Hour
	DefaultLogLevel           = "info"
	DefaultExecOutputTemplate = SandboxIDPlaceholder + "/" + ExecIDPlaceholder
	DefaultOutputMax          = 1 << 30  // artifacts.output_max: what one run's --output copies may write
	DefaultExecOutputMax      = 64 << 20 // artifacts.exec_output_max: one API exec's output file, per stream
	MaxSize                   = 1 << 50  // the largest size a size key or --output-max takes (1 PiB)
	DefaultVaultStorage       = "encrypted-file"
	DefaultPoolMax            = 8   // runtime.pool_max: parked sandboxes of all pools of a daemon together
	MaxPoolMax                = 256 // the largest runtime.pool_max
	// runtime.shared_network_max: sandboxes on one shard of the shared
	// network; a Linux bridge holds at most 1023 ports.
	DefaultSharedNetworkMax = 1000
	MaxSharedNetworkMax     = 1020
	// runtime.creates_per_engine: sandboxes made or started on one Engine at
	// once, the others queued in order.
	DefaultCreatesPerEngine = 8
	MaxCreatesPerEngine     = 256
)

// Config is a validated config.toml.
type Config struct {
	// File is the path it was read from (also when it does not exist).
	File string
	// Exists is false when File was missing and every value is a default.
	Exists bool

	Runtime    Runtime
	Artifacts  Artifacts
	Vault      Vault
	Kubernetes Kubernetes
	Services   Services
	Remote     Remote
}

// Remote is [remote]: how the CLI reaches the daemon of an ssh:// host.
type Remote struct {
	// Command (command) is the airlock the remote runs, a name on its PATH
	// or a path there (~/ for its home); "" = this build from the remote
	// user's cache, else airlock on its PATH (docs/daemon.md).
	Command string
}

// Services is [services]: what the user allows the services of every manifest.
type Services struct {
	// EnvFilesOutside (env_files_outside) are env files, absolute after Load,
	// that a service (services.*.env_file, a compose file's env_file) may read
	// from outside the project; any other is a config error of the manifest.
	EnvFilesOutside []string
}

// Runtime is [runtime].
type Runtime struct {
	IdleTTL           time.Duration // idle_ttl: a ready sandbox unused this long is stopped
	EventRetentionTTL time.Duration // event_retention_ttl: deleted sandboxes' history is purged after this
	LogLevel          string        // log_level: debug | info | warn | error
	StateRoot         string        // state_root: "" = $XDG_DATA_HOME/airlock; absolute after Load
	Backend           string        // backend: docker | kubernetes
	PoolMax           int           // pool_max: parked sandboxes of all warm pools together (0: no pool)
	SharedNetworkMax  int           // shared_network_max: sandboxes on one shard of the shared network
	CreatesPerEngine  int           // creates_per_engine: sandboxes made or started on one Engine at once
}

// Artifacts is [artifacts].
type Artifacts struct {
	ExecOutputRoot     string // exec_output_root: "" = <state root>/exec-output; absolute after Load
	ExecOutputTemplate string // exec_output_template
	OutputMax          int64  // output_max: bytes one run's --output copies may write on the host
	ExecOutputMax      int64  // exec_output_max: bytes an API exec's stdout or stderr file may hold
}

// Vault is [vault].
type Vault struct {
	Storage string // storage: encrypted-file | file | disabled
}

// Kubernetes is [kubernetes]: where and how the kubernetes backend runs
// sandboxes. The cluster is the one kubectl would use (KUBECONFIG, else
// ~/.kube/config), in Context.
type Kubernetes struct {
	Namespace       string // namespace: where the sandboxes' Pods go
	Image           string // image: the airlock image; "" = the running build's (the caller resolves it)
	AllowPrivileged bool   // allow_privileged: sandbox.privileged may make a privileged Pod
	Context         string // context: the kube context; "" = the current one
	CreateNamespace bool   // create_namespace: create Namespace when it does not exist

	// What shapes every Pod (kubepod.go): node_selector, tolerations,
	// runtime_class_name, service_account and [kubernetes.resources].
	NodeSelector     map[string]string
	Tolerations      []Toleration
	RuntimeClassName string
	ServiceAccount   string
	Resources        Resources
}

// Default returns the configuration used when config.toml does not exist.
func Default() *Config {
	return &Config{
		Runtime: Runtime{
			IdleTTL:           DefaultIdleTTL,
			EventRetentionTTL: DefaultEventRetentionTTL,
			LogLevel:          DefaultLogLevel,
			Backend:           DefaultBackend,
			PoolMax:           DefaultPoolMax,
			SharedNetworkMax:  DefaultSharedNetworkMax,
			CreatesPerEngine:  DefaultCreatesPerEngine,
		},
		Artifacts:  Artifacts{ExecOutputTemplate: DefaultExecOutputTemplate, OutputMax: DefaultOutputMax, ExecOutputMax: DefaultExecOutputMax},
		Vault:      Vault{Storage: DefaultVaultStorage},
		Kubernetes: Kubernetes{Namespace: DefaultNamespace, CreateNamespace: true},
	}
}

// Error is one problem in config.toml, located by file, line and key.
type Error struct {
	File string
	Line int // 0 when unknown
	Key  string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found, in file order.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// IsConfigError reports whether err is a problem with config.toml's content
// (the CLI's exit code 2), as opposed to a failure to read it.
func IsConfigError(err error) bool {
	var e *Error
	var es Errors
	return errors.As(err, &e) || errors.As(err, &es)
}

// file is config.toml as written; every value is optional.
type file struct {
	Runtime *struct {
		IdleTTL           *string `toml:"idle_ttl"`
		EventRetentionTTL *string `toml:"event_retention_ttl"`
		LogLevel          *string `toml:"log_level"`
		StateRoot         *string `toml:"state_root"`
		Backend           *string `toml:"backend"`
		PoolMax           *int64  `toml:"pool_max"`
		SharedNetworkMax  *int64  `toml:"shared_network_max"`
		CreatesPerEngine  *int64  `toml:"creates_per_engine"`
	} `toml:"runtime"`
	Artifacts *struct {
		ExecOutputRoot     *string `toml:"exec_output_root"`
		ExecOutputTemplate *string `toml:"exec_output_template"`
		OutputMax          *string `toml:"output_max"`
		ExecOutputMax      *string `toml:"exec_output_max"`
	} `toml:"artifacts"`
	Vault *struct {
		Storage *string `toml:"storage"`
	} `toml:"vault"`
	Services *struct {
		EnvFilesOutside []string `toml:"env_files_outside"`
	} `toml:"services"`
	Remote *struct {
		Command *string `toml:"command"`
	} `toml:"remote"`
	Kubernetes *struct {
		Namespace       *string `toml:"namespace"`
		Image           *string `toml:"image"`
		AllowPrivileged *bool   `toml:"allow_privileged"`
		Context         *string `toml:"context"`
		CreateNamespace *bool   `toml:"create_namespace"`
		kubernetesPodFile
	} `toml:"kubernetes"`
}

// Load reads and validates the config.toml at path. A missing file gives the
// defaults. A leading ~ in state_root and exec_output_root is the user's home
// (os.UserHomeDir).
func Load(path string) (*Config, error) {
	home, _ := os.UserHomeDir()
	return LoadWithHome(path, home)
}

// LoadWithHome is Load with the home directory given (the CLI passes its $HOME,
// so tests stay hermetic).
func LoadWithHome(path, home string) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		c := Default()
		c.File = path
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the user config %s: %w", path, err)
	}
	return Parse(path, data, home)
}

// Parse validates config.toml content; name is used in errors, home expands ~.
func Parse(name string, data []byte, home string) (*Config, error) {
	src := string(data)
	var f file
	md, err := toml.Decode(src, &f)
	if err != nil {
		return nil, tomlError(name, src, err)
	}
	p := &parser{name: name, home: home, lines: scanKeyLines(src)}
	var reported []string
	for _, k := range md.Undecoded() {
		key := k.String()
		if slices.ContainsFunc(reported, func(r string) bool { return strings.HasPrefix(key, r+".") }) {
			continue
		}
		reported = append(reported, key)
		if len(k) == 1 {
			p.add(key, "unknown key (the tables are runtime, artifacts, vault, kubernetes, services and remote)")
		} else {
			p.add(key, "unknown key")
		}
	}
	c := Default()
	c.File, c.Exists = name, true
	p.runtime(&f, c)
	p.artifacts(&f, c)
	p.services(&f, c)
	if v := f.Vault; v != nil && v.Storage != nil {
		switch *v.Storage {
		case "encrypted-file", "file", "disabled":
			c.Vault.Storage = *v.Storage
		default:
			p.add("vault.storage", fmt.Sprintf("unknown storage %q (want encrypted-file, file or disabled)", *v.Storage))
		}
	}
	p.kubernetes(&f, c)
	if r := f.Remote; r != nil && r.Command != nil {
		if *r.Command == "" || strings.ContainsAny(*r.Command, " \t\n'\"$`\\;&|<>()*?[]{}#!") {
			p.add("remote.command", fmt.Sprintf("%q is not a command name or path (no spaces, quotes or shell characters)", *r.Command))
		} else {
			c.Remote.Command = *r.Command
		}
	}
	if len(p.errs) > 0 {
		sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
		return nil, p.errs
	}
	return c, nil
}

// parser collects the errors of one config.toml, each at its key's line, and
// reads its kinds of values.
type parser struct {
	name, home string
	lines      map[string]int
	errs       Errors
}

func (p *parser) add(key, msg string) {
	p.errs = append(p.errs, &Error{File: p.name, Line: p.lines[key], Key: key, Msg: msg})
}

func (p *parser) duration(key string, v *string, dst *time.Duration) {
	if v == nil {
		return
	}
	d, err := time.ParseDuration(*v)
	switch {
	case err != nil:
		p.add(key, fmt.Sprintf("invalid duration %q (use Go durations such as \"30m\", \"168h\")", *v))
	case d <= 0:
		p.add(key, fmt.Sprintf("must be a positive duration, got %q", *v))
	default:
		*dst = d
	}
}

func (p *parser) dir(key string, v *string, dst *string) {
	if v == nil || *v == "" {
		return
	}
	path := *v
	if path == "~" || strings.HasPrefix(path, "~/") {
		if p.home == "" {
			p.add(key, "cannot expand ~: the home directory is unknown")
			return
		}
		path = filepath.Join(p.home, path[1:])
	}
	if !filepath.IsAbs(path) {
		p.add(key, fmt.Sprintf("must be an absolute path (or start with ~/), got %q", *v))
		return
	}
	*dst = filepath.Clean(path)
}

func (p *parser) size(key string, v *string, dst *int64) {
	if v == nil {
		return
	}
	n, err := ParseSize(*v)
	if err != nil {
		p.add(key, err.Error())
		return
	}
	*dst = n
}

// between takes a whole number from lo to hi; why, when set, says why hi.
func (p *parser) between(key string, v *int64, lo, hi int64, why string, dst *int) {
	if v == nil {
		return
	}
	if *v < lo || *v > hi {
		p.add(key, fmt.Sprintf("must be between %d and %d (%sgot %d)", lo, hi, why, *v))
		return
	}
	*dst = int(*v)
}

// checked sets *dst to *v when check accepts it, else reports key.
func (p *parser) checked(key string, v *string, check func(string) error, dst *string) {
	if v == nil {
		return
	}
	if err := check(*v); err != nil {
		p.add(key, err.Error())
		return
	}
	*dst = *v
}

func (p *parser) runtime(f *file, c *Config) {
	r := f.Runtime
	if r == nil {
		return
	}
	p.duration("runtime.idle_ttl", r.IdleTTL, &c.Runtime.IdleTTL)
	p.duration("runtime.event_retention_ttl", r.EventRetentionTTL, &c.Runtime.EventRetentionTTL)
	p.checked("runtime.log_level", r.LogLevel, func(v string) error { _, err := ParseLogLevel(v); return err }, &c.Runtime.LogLevel)
	p.dir("runtime.state_root", r.StateRoot, &c.Runtime.StateRoot)
	p.between("runtime.pool_max", r.PoolMax, 0, MaxPoolMax, "", &c.Runtime.PoolMax)
	p.between("runtime.shared_network_max", r.SharedNetworkMax, 1, MaxSharedNetworkMax, "a bridge network holds at most 1023 containers; ", &c.Runtime.SharedNetworkMax)
	p.between("runtime.creates_per_engine", r.CreatesPerEngine, 1, MaxCreatesPerEngine, "", &c.Runtime.CreatesPerEngine)
	p.checked("runtime.backend", r.Backend, CheckBackend, &c.Runtime.Backend)
}

func (p *parser) artifacts(f *file, c *Config) {
	a := f.Artifacts
	if a == nil {
		return
	}
	p.dir("artifacts.exec_output_root", a.ExecOutputRoot, &c.Artifacts.ExecOutputRoot)
	p.checked("artifacts.exec_output_template", a.ExecOutputTemplate, checkTemplate, &c.Artifacts.ExecOutputTemplate)
	p.size("artifacts.output_max", a.OutputMax, &c.Artifacts.OutputMax)
	p.size("artifacts.exec_output_max", a.ExecOutputMax, &c.Artifacts.ExecOutputMax)
}

func (p *parser) services(f *file, c *Config) {
	sv := f.Services
	if sv == nil {
		return
	}
	for _, path := range sv.EnvFilesOutside {
		var abs string
		if p.dir("services.env_files_outside", &path, &abs); abs != "" {
			c.Services.EnvFilesOutside = append(c.Services.EnvFilesOutside, abs)
		} else if path == "" {
			p.add("services.env_files_outside", "an empty path: name an env file by its absolute path (or ~/…)")
		}
	}
}

func (p *parser) kubernetes(f *file, c *Config) {
	k := f.Kubernetes
	if k == nil {
		return
	}
	p.checked("kubernetes.namespace", k.Namespace, checkNamespace, &c.Kubernetes.Namespace)
	p.checked("kubernetes.image", k.Image, checkImage, &c.Kubernetes.Image)
	p.checked("kubernetes.context", k.Context, func(v string) error {
		if strings.ContainsAny(v, "\x00\n\r") {
			return fmt.Errorf("invalid context name %q (it must not hold a NUL or a line break)", v)
		}
		return nil
	}, &c.Kubernetes.Context)
	if k.AllowPrivileged != nil {
		c.Kubernetes.AllowPrivileged = *k.AllowPrivileged
	}
	if k.CreateNamespace != nil {
		c.Kubernetes.CreateNamespace = *k.CreateNamespace
	}
	parseKubernetesPod(&k.kubernetesPodFile, &c.Kubernetes, p.add)
}

var placeholderRE = regexp.MustCompile(`\{[^{}]*\}`)

// ParseSize reads a size of artifacts.output_max, artifacts.exec_output_max
// or --output-max: a number of bytes with an optional unit k, m, g, t or p
// (powers of 1024; "KiB", "MB", "g" and "G" all mean the same), e.g. "1GiB",
// "64m", "500k". It must be from 1 byte to 1 PiB.
func ParseSize(s string) (int64, error) {
	n, err := units.RAMInBytes(strings.TrimSpace(s))
	switch {
	case err != nil || strings.TrimSpace(s) == "":
		return 0, fmt.Errorf("invalid size %q (use a number of bytes with an optional unit k, m, g or t, powers of 1024: e.g. \"1GiB\", \"64m\")", s)
	case n <= 0:
		return 0, fmt.Errorf("size %q must be at least 1 byte", s)
	case n > MaxSize:
		return 0, fmt.Errorf("size %q is above the maximum of 1 PiB", s)
	}
	return n, nil
}

// FormatSize writes n bytes for people: "512 bytes", "64.0 KiB", "1.0 GiB".
func FormatSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	f, unit := float64(n)/1024, 0
	names := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	for f >= 1024 && unit < len(names)-1 {
		f, unit = f/1024, unit+1
	}
	return fmt.Sprintf("%.1f %s", f, names[unit])
}

// CheckBackend checks a backend name (runtime.backend, --backend,
// AIRLOCK_BACKEND): docker or kubernetes.
func CheckBackend(name string) error {
	if slices.Contains(Backends, name) {
		return nil
	}
	return fmt.Errorf("unknown backend %q (want docker or kubernetes)", name)
}

// namespaceRE is a DNS-1123 label, what Kubernetes takes as a namespace name.
var namespaceRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// checkNamespace validates kubernetes.namespace.
func checkNamespace(ns string) error {
	switch {
	case ns == "":
		return errors.New("must not be empty (the default is \"airlock\")")
	case len(ns) > 63 || !namespaceRE.MatchString(ns):
		return fmt.Errorf("invalid namespace %q (a Kubernetes namespace is at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit)", ns)
	}
	return nil
}

// checkImage validates kubernetes.image: empty (the running build's image) or
// an image reference a registry takes.
func checkImage(ref string) error {
	if ref == "" {
		return nil
	}
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return fmt.Errorf("invalid image reference %q (%v; e.g. \"registry.example.com/airlock:1.2.0\", or \"\" for this build's localhost/airlock image)", ref, err)
	}
	return nil
}

// checkTemplate validates artifacts.exec_output_template: a relative path with
// both placeholders, no other placeholder, and no ".." element.
func checkTemplate(t string) error {
	switch {
	case t == "":
		return errors.New("must not be empty")
	case !strings.Contains(t, SandboxIDPlaceholder) || !strings.Contains(t, ExecIDPlaceholder):
		return fmt.Errorf("must contain both %s and %s, got %q", SandboxIDPlaceholder, ExecIDPlaceholder, t)
	case strings.HasPrefix(t, "/"):
		return fmt.Errorf("must be relative to exec_output_root, got %q", t)
	case strings.ContainsAny(t, "\\\x00"):
		return fmt.Errorf("must not contain a backslash or NUL, got %q", t)
	}
	for _, el := range strings.Split(t, "/") {
		if el == ".." {
			return fmt.Errorf("must not contain \"..\", got %q", t)
		}
	}
	for _, p := range placeholderRE.FindAllString(t, -1) {
		if p != SandboxIDPlaceholder && p != ExecIDPlaceholder {
			return fmt.Errorf("unknown placeholder %s (known: %s, %s)", p, SandboxIDPlaceholder, ExecIDPlaceholder)
		}
	}
	return nil
}

// logLevels maps the names of runtime.log_level and --log-level to slog levels.
var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// ParseLogLevel returns the slog level of a log level name (runtime.log_level,
// --log-level): debug, info, warn or error. Any other name is an error, and
// gives slog.LevelInfo.
func ParseLogLevel(name string) (slog.Level, error) {
	if l, ok := logLevels[name]; ok {
		return l, nil
	}
	return slog.LevelInfo, fmt.Errorf("unknown log level %q (want debug, info, warn or error)", name)
}

// SlogLevel returns runtime.log_level as a slog level.
func (c *Config) SlogLevel() slog.Level {
	l, _ := ParseLogLevel(c.Runtime.LogLevel)
	return l
}

// StateDir is runtime.state_root, or $XDG_DATA_HOME/airlock when it is empty.
func (c *Config) StateDir(p *paths.Paths) string {
	if c.Runtime.StateRoot != "" {
		return c.Runtime.StateRoot
	}
	return p.DataDir
}

// ExecOutputRoot is artifacts.exec_output_root, or <StateDir>/exec-output
// (by default $XDG_DATA_HOME/airlock/exec-output) when it is empty.
func (c *Config) ExecOutputRoot(p *paths.Paths) string {
	if c.Artifacts.ExecOutputRoot != "" {
		return c.Artifacts.ExecOutputRoot
	}
	return filepath.Join(c.StateDir(p), "exec-output")
}

var (
	typeErrRE  = regexp.MustCompile(`^toml: (?:line (\d+) )?\(last key "((?:[^"\\]|\\.)*)"\): (.*)$`)
	badTypeRE  = regexp.MustCompile(`incompatible types: TOML value has type ([\w.\[\]]+); destination has type ([\w.\[\]*]+)`)
	mismatchRE = regexp.MustCompile(`^type mismatch for .+: expected (\w+) but found ([\w.\[\]]+)$`)
)

// tomlError turns a BurntSushi/toml error into an *Error naming file, line and key.
func tomlError(name, src string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		line := pe.Position.Line
		if s := pe.Position.Start; s > 0 && s <= len(src) {
			line = 1 + strings.Count(src[:s], "\n")
		}
		return &Error{File: name, Line: line, Key: pe.LastKey, Msg: "invalid TOML: " + pe.Message}
	}
	if m := typeErrRE.FindStringSubmatch(err.Error()); m != nil {
		key := m[2]
		lines := scanKeyLines(src)
		line := lines[key]
		for k := key; line == 0 && strings.Contains(k, "."); {
			// A key inside an inline table: the line of the table's key.
			k = k[:strings.LastIndex(k, ".")]
			line = lines[k]
		}
		msg := m[3]
		if t := badTypeRE.FindStringSubmatch(msg); t != nil {
			msg = fmt.Sprintf("wrong type: expected %s, got %s", describeGo(t[2]), describeTOML(t[1]))
		} else if t := mismatchRE.FindStringSubmatch(msg); t != nil {
			msg = fmt.Sprintf("wrong type: expected %s, got %s", describeGo(t[1]), describeTOML(t[2]))
		}
		return &Error{File: name, Line: line, Key: key, Msg: msg}
	}
	return &Error{File: name, Msg: err.Error()}
}

func describeGo(t string) string {
	t = strings.TrimLeft(t, "*")
	switch {
	case t == "string":
		return "a string"
	case t == "bool" || t == "boolean":
		return "a boolean"
	case strings.HasPrefix(t, "struct") || t == "map" || t == "table":
		return "a table"
	}
	return t
}

func describeTOML(t string) string {
	switch strings.ToLower(t) {
	case "integer", "int64":
		return "an integer"
	case "float", "float64":
		return "a float"
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "[]interface {}", "array", "slice":
		return "an array"
	case "map[string]interface {}", "hash", "table":
		return "a table"
	case "time.time", "datetime":
		return "a date-time"
	}
	return t
}

// scanKeyLines maps "table.key" to the line that sets it, and "table" to its
// header's line, for error messages. It understands the simple shapes a
// config.toml has: [table] headers and key = value lines.
func scanKeyLines(src string) map[string]int {
	out := map[string]int{}
	table := ""
	for i, raw := range strings.Split(src, "\n") {
		l := strings.TrimSpace(raw)
		if l == "" || l[0] == '#' {
			continue
		}
		if strings.HasPrefix(l, "[") {
			end := strings.Index(l, "]")
			if end < 0 {
				continue
			}
			table = normKey(strings.Trim(l[:end], "[]"))
			if _, ok := out[table]; !ok {
				out[table] = i + 1
			}
			continue
		}
		eq := strings.Index(l, "=")
		if eq <= 0 {
			continue
		}
		k := normKey(l[:eq])
		if table != "" {
			k = table + "." + k
		}
		if _, ok := out[k]; !ok {
			out[k] = i + 1
		}
	}
	return out
}

func normKey(k string) string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}
