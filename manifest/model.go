// Package manifest decodes sandbox.toml and its layers (presets, sandbox.local.toml),
// merges them, applies defaults, substitutes ${VAR} references and validates the
// result into a Resolved manifest. It is a pure model: no Docker, no processes.
package manifest

import "github.com/airlock-dev/airlock/manifest/specrules"

// Manifest is the schema of sandbox.toml, of sandbox.local.toml and of every preset.
// Field tags carry the TOML key names, which are also the names used in every output
// (JSON included).
type Manifest struct {
	Presets  []string           `toml:"presets" json:"presets"`
	Tools    []string           `toml:"tools" json:"tools"`
	Sandbox  Sandbox            `toml:"sandbox" json:"sandbox"`
	Env      Env                `toml:"env" json:"env,omitempty"`
	Mounts   map[string]Mount   `toml:"mounts" json:"mounts,omitempty"`
	Copies   map[string]Copy    `toml:"copies" json:"copies,omitempty"`
	Daemons  map[string]Daemon  `toml:"daemons" json:"daemons,omitempty"`
	Services map[string]Service `toml:"services" json:"services,omitempty"`
	Compose  *Compose           `toml:"compose" json:"compose,omitempty"`
}

// Compose is [compose]: services read from a compose file, as the lowest layer
// of [services.*] (docs/compose.md).
type Compose struct {
	File     string   `toml:"file" json:"file"`
	Services []string `toml:"services" json:"services,omitempty"`
	Profiles []string `toml:"profiles" json:"profiles,omitempty"`
	Ignore   []string `toml:"ignore" json:"ignore,omitempty"`
}

// Env is a table of environment variables: [env], daemons.<name>.env and
// services.<name>.env. In a layer, a name set to false removes the variable a
// lower layer set (TOML has no null); the merged manifest holds strings only.
type Env map[string]string

// UnmarshalTOML takes the strings of a layer's table. A false is a removal, which
// the merge applies from the layer's raw tables; every other value is reported
// by decodeLayer with its line, and a value that is not a table by schemaErrors.
func (e *Env) UnmarshalTOML(data any) error {
	m, ok := data.(map[string]any)
	if !ok {
		return nil
	}
	out := make(Env, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	*e = out
	return nil
}

// HostUser is the sandbox.user that stands for the user running airlock: the
// CLI replaces it with that user's "uid:gid" before it sends the manifest to
// the control daemon, which refuses it unresolved (the daemon may run as
// another user, or on another machine). The manifest itself never looks the
// user up.
const HostUser = "host"

// Sandbox is the [sandbox] table: the primary container.
type Sandbox struct {
	Image   string   `toml:"image" json:"image,omitempty"`
	Build   *Build   `toml:"build" json:"build,omitempty"`
	Egress  *Egress  `toml:"egress" json:"egress,omitempty"`
	Workdir string   `toml:"workdir" json:"workdir"`
	User    string   `toml:"user" json:"user"`
	Shell   []string `toml:"shell" json:"shell"`
	// PathPrepend are directories put in front of the PATH every process of
	// the sandbox starts with (the image's, unless env sets PATH).
	PathPrepend  []string `toml:"path_prepend" json:"path_prepend,omitempty"`
	Harden       bool     `toml:"harden" json:"harden"`
	Privileged   bool     `toml:"privileged" json:"privileged"`
	Network      string   `toml:"network" json:"network"`
	Ports        []string `toml:"ports" json:"ports"`
	CapAdd       []string `toml:"cap_add" json:"cap_add"`
	CapDrop      []string `toml:"cap_drop" json:"cap_drop"`
	Project      string   `toml:"project" json:"project"`
	ReadyTimeout string   `toml:"ready_timeout" json:"ready_timeout"`
	CPUs         float64  `toml:"cpus" json:"cpus"`
	Memory       string   `toml:"memory" json:"memory"`
	// ExtraHosts are "name:ip" lines added to the primary's /etc/hosts.
	ExtraHosts []string `toml:"extra_hosts" json:"extra_hosts,omitempty"`
	// WaitForDaemons makes run return only once every daemon shut down and the sandbox is removed.
	WaitForDaemons bool `toml:"wait_for_daemons" json:"wait_for_daemons,omitempty"`
	// Pool keeps sandboxes of this manifest made and started in advance for
	// run (docs/pool.md); nil: no pool.
	Pool *Pool `toml:"pool" json:"pool,omitempty"`
}

// Pool is [sandbox.pool]: how many started sandboxes the daemon keeps parked
// for this manifest's runs, and how long an unused one is kept.
type Pool struct {
	Size    int    `toml:"size" json:"size"`
	IdleTTL string `toml:"idle_ttl" json:"idle_ttl"`
}

// DefaultPoolIdleTTL is sandbox.pool.idle_ttl's default.
const DefaultPoolIdleTTL = "15m"

// MaxPoolSize bounds sandbox.pool.size (runtime.pool_max bounds all pools together).
const MaxPoolSize = 64

// Egress is [sandbox.egress]: only the listed destinations are reachable, through
// an airlock egress proxy (design.md §7).
type Egress struct {
	Allow   []string `toml:"allow" json:"allow"`
	Network string   `toml:"network" json:"network"`
}

// Build is [sandbox.build]: an image built from a context directory.
type Build struct {
	Context    string            `toml:"context" json:"context"`
	Dockerfile string            `toml:"dockerfile" json:"dockerfile"`
	Args       map[string]string `toml:"args,omitempty" json:"args,omitempty"`
}

// Mount is one [mounts.<name>] entry: a bind mount from the host.
type Mount struct {
	Enabled     bool   `toml:"enabled" json:"enabled"`
	Source      string `toml:"source" json:"source"`
	Target      string `toml:"target" json:"target"`
	ReadOnly    bool   `toml:"read_only" json:"read_only"`
	Missing     string `toml:"missing" json:"missing"`
	CreateMode  string `toml:"create_mode" json:"create_mode"`
	FileContent string `toml:"file_content" json:"file_content"`
}

// Copy is one [copies.<name>] entry: a host file or tree copied in before start.
type Copy struct {
	Enabled bool     `toml:"enabled" json:"enabled"`
	Source  string   `toml:"source" json:"source"`
	Target  string   `toml:"target" json:"target"`
	Exclude []string `toml:"exclude" json:"exclude"`
}

// Daemon is one [daemons.<name>] entry: a sidecar process run by the supervisor.
// Oneshot makes it a setup step that runs once to completion; it is left out of
// JSON when false, so the plan hashes of manifests without one stay as they were.
type Daemon struct {
	Enabled     bool     `toml:"enabled" json:"enabled"`
	Command     []string `toml:"command" json:"command"`
	Cwd         string   `toml:"cwd" json:"cwd"`
	Signal      string   `toml:"signal" json:"signal"`
	Timeout     int      `toml:"timeout" json:"timeout"`
	Restart     string   `toml:"restart" json:"restart"`
	MaxRestarts int      `toml:"max_restarts" json:"max_restarts"`
	Harden      bool     `toml:"harden" json:"harden"`
	Oneshot     bool     `toml:"oneshot" json:"oneshot,omitempty"`
	After       []string `toml:"after" json:"after"`
	User        string   `toml:"user" json:"user"`
	Ready       *Ready   `toml:"ready" json:"ready,omitempty"`
	Env         Env      `toml:"env" json:"env,omitempty"`
}

// Ready is a daemon's readiness check: exactly one of TCP, HTTP, Cmd or Log.
type Ready struct {
	TCP string `toml:"tcp,omitempty" json:"tcp,omitempty"`
	// Send and Expect make a tcp check a request and its answer.
	Send    string   `toml:"send,omitempty" json:"send,omitempty"`
	Expect  string   `toml:"expect,omitempty" json:"expect,omitempty"`
	HTTP    string   `toml:"http,omitempty" json:"http,omitempty"`
	Cmd     []string `toml:"cmd,omitempty" json:"cmd,omitempty"`
	Log     string   `toml:"log,omitempty" json:"log,omitempty"`
	Timeout string   `toml:"timeout" json:"timeout"`
}

// Kind names the check that is set ("tcp", "http", "cmd" or "log"), or "" when none is.
func (r *Ready) Kind() string {
	switch {
	case r == nil:
		return ""
	case r.TCP != "":
		return "tcp"
	case r.HTTP != "":
		return "http"
	case len(r.Cmd) > 0:
		return "cmd"
	case r.Log != "":
		return "log"
	}
	return ""
}

// Service is one [services.<name>] entry: a sibling container on the sandbox network.
type Service struct {
	Enabled     bool         `toml:"enabled" json:"enabled"`
	Image       string       `toml:"image" json:"image"`
	Command     []string     `toml:"command" json:"command"`
	Required    bool         `toml:"required" json:"required"`
	Env         Env          `toml:"env" json:"env,omitempty"`
	Healthcheck *Healthcheck `toml:"healthcheck" json:"healthcheck,omitempty"`
	// The keys below have compose's meaning (docs/manifest.md, "Services").
	Entrypoint []string          `toml:"entrypoint" json:"entrypoint,omitempty"`
	User       string            `toml:"user" json:"user,omitempty"`
	WorkingDir string            `toml:"working_dir" json:"working_dir,omitempty"`
	ShmSize    string            `toml:"shm_size" json:"shm_size,omitempty"`
	EnvFile    []string          `toml:"env_file" json:"env_file,omitempty"`
	ExtraHosts []string          `toml:"extra_hosts" json:"extra_hosts,omitempty"`
	Aliases    []string          `toml:"aliases" json:"aliases,omitempty"`
	Volumes    []string          `toml:"volumes" json:"volumes,omitempty"`
	Tmpfs      []string          `toml:"tmpfs" json:"tmpfs,omitempty"`
	CapAdd     []string          `toml:"cap_add" json:"cap_add,omitempty"`
	CapDrop    []string          `toml:"cap_drop" json:"cap_drop,omitempty"`
	Ulimits    map[string]Ulimit `toml:"ulimits" json:"ulimits,omitempty"`
	DependsOn  DependsOn         `toml:"depends_on" json:"depends_on,omitempty"`
	Ports      []string          `toml:"ports" json:"ports,omitempty"`
	// Loopback says where a service with ports meets the sandbox's
	// 127.0.0.1 (LoopbackShared, LoopbackForwarded; empty: shared when it can
	// be, see SharesLoopback).
	Loopback string `toml:"loopback" json:"loopback,omitempty"`
}

// Healthcheck is a service's health probe, run by the Engine inside the service container.
type Healthcheck struct {
	Cmd      []string `toml:"cmd" json:"cmd"`
	Interval string   `toml:"interval" json:"interval"`
	Timeout  string   `toml:"timeout" json:"timeout"`
	Retries  int      `toml:"retries" json:"retries"`
	// StartPeriod is a grace time in which failed probes do not count.
	StartPeriod string `toml:"start_period" json:"start_period,omitempty"`
	// StartInterval is the time between probes during StartPeriod.
	StartInterval string `toml:"start_interval" json:"start_interval,omitempty"`
}

// Signals are the daemon stop signals a manifest may name (design.md §3).
var Signals = specrules.Signals

// Tools are the builtin tools a manifest may list (design.md §7), by their canonical
// names (the names the agents-sandbox configuration uses).
var Tools = []string{"git", "ssh-agent", "claude", "codex", "go", "npm", "uv", "apt"}

// ToolAliases maps the older names of builtin tools to their canonical names. A
// manifest may use either; the resolved manifest holds the canonical one.
var ToolAliases = map[string]string{"go-cache": "go", "npm-cache": "npm", "uv-cache": "uv", "apt-cache": "apt"}

// CanonicalTool returns the canonical name of a builtin tool or alias, and whether
// the name is known at all.
func CanonicalTool(name string) (string, bool) {
	if c, ok := ToolAliases[name]; ok {
		return c, true
	}
	for _, t := range Tools {
		if t == name {
			return t, true
		}
	}
	return "", false
}

// MissingModes are the values of mounts.*.missing.
var MissingModes = []string{"fail", "warn", "ignore", "create-dir", "create-file"}

// RestartPolicies are the values of daemons.*.restart.
var RestartPolicies = specrules.RestartPolicies

// Networks are the values of sandbox.network.
var Networks = []string{"bridge", "none", "host"}

// ProjectModes are the values of sandbox.project: how the project dir reaches the
// Engine (auto: bind on a local Engine, copy on a remote one).
var ProjectModes = []string{"auto", "bind", "copy"}
