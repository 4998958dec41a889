package backend

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/supervisor"
)

// MainUser sets the user of the main command, of `supervise exec` and of every
// daemon that names none to user: what a supervisor running as root beside a
// non-root sandbox user is given.
func MainUser(spec *supervisor.Spec, user string) {
	spec.Main.User = user
	for _, d := range spec.Daemons {
		if d.User == "" {
			d.User = user
		}
	}
}

// Workdir is the main command's working directory: -w, else sandbox.workdir,
// else the project dir.
func Workdir(req *Request, r *manifest.Resolved) string {
	switch {
	case req.Workdir != "":
		return req.Workdir
	case r.Sandbox.Workdir != "":
		return r.Sandbox.Workdir
	}
	return r.ProjectDir
}

// HardenAll reports whether every process of the sandbox is hardened, so that the
// whole container may get no-new-privileges: only when the main process and every
// daemon are hardened (design.md §6).
func HardenAll(r *manifest.Resolved) bool {
	if !r.Sandbox.Harden {
		return false
	}
	for _, d := range r.Daemons {
		if !d.Harden {
			return false
		}
	}
	return true
}

// StopSeconds is how long `stop` waits for the supervisor to shut the daemons
// down: the longest daemon
// timeout plus a margin (an hour when a daemon waits forever). A timeout is
// bounded as validation bounds it (a year), so that the Engine's stop timeout
// (seconds, made a time.Duration) cannot wrap around, even for a manifest that
// was not validated (a record written by an older daemon).
func StopSeconds(r *manifest.Resolved) int {
	longest := 0
	for _, d := range r.Daemons {
		t := d.Timeout
		if t == 0 {
			t = 3600
		}
		longest = max(longest, min(max(t, 0), manifest.MaxDaemonTimeout))
	}
	return longest + 5
}

// Hostname is a sandbox's host name: a DNS label made from its ID.
func Hostname(id string) string {
	h := strings.ToLower(strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		return '-'
	}, id))
	if len(h) > 63 {
		h = h[:63]
	}
	return strings.Trim(h, "-")
}

// SpecWithTools turns the manifest into the supervisor's spec, with what the
// host's builtin tools add: path in front of every process's PATH (after
// sandbox.path_prepend's) and env (K=V) under the manifest's [env]. Substituted
// values are not written: the spec refers to them by key path, and they reach
// the supervisor through the backend's API (see DeliverValues).
func SpecWithTools(req *Request, r *manifest.Resolved, path, env []string) *supervisor.Spec {
	harden := r.Sandbox.Harden
	spec := &supervisor.Spec{
		Version:        supervisor.SpecVersion,
		LogDir:         supervisor.DaemonLogRoot,
		StatusFile:     supervisor.StatusFile,
		ExecEnvFile:    ExecEnvIn,
		SecretsSocket:  SecretsSocketIn,
		StatusReadFile: StatusReadIn,
		Quiet:          req.Quiet,
		EndMarker:      req.EndMarker,
		Main: supervisor.Main{
			Argv:   req.Command,
			Cwd:    Workdir(req, r),
			Harden: &harden,
		},
	}
	spec.PathPrepend = slices.Concat(r.Sandbox.PathPrepend, path)
	spec.Main.Env = withProxyEnv(r, envEntries([]string{"env"}, r.Env, r.Sources))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, own := r.Env[k]; own {
			continue // [env] names it: the user's value, not the tool's default
		}
		spec.Main.Env = append(spec.Main.Env, supervisor.EnvEntry{Name: k, Value: &v})
	}
	for _, kv := range req.Env {
		k, v, _ := strings.Cut(kv, "=")
		spec.Main.Env = append(spec.Main.Env, supervisor.EnvEntry{Name: k, Value: &v})
	}
	for _, k := range slices.Sorted(maps.Keys(req.EnvSecrets)) {
		spec.Main.Env = append(spec.Main.Env, supervisor.EnvEntry{Name: k, Secret: envSecretKey(k)})
	}
	for _, name := range slices.Sorted(maps.Keys(r.Daemons)) {
		d := r.Daemons[name]
		timeout, maxRestarts, dh := d.Timeout, d.MaxRestarts, d.Harden
		sd := &supervisor.Daemon{
			Name: name, Command: d.Command, Cwd: d.Cwd, Signal: d.Signal, Timeout: &timeout,
			Restart: d.Restart, MaxRestarts: &maxRestarts, Harden: &dh, After: d.After, User: d.User, Oneshot: d.Oneshot,
			Env: withProxyEnv(r, envEntries([]string{"daemons", name, "env"}, d.Env, r.Sources)),
		}
		if d.Ready != nil {
			sd.Ready = &supervisor.Ready{TCP: d.Ready.TCP, Send: d.Ready.Send, Expect: d.Ready.Expect, HTTP: d.Ready.HTTP, Cmd: d.Ready.Cmd, Log: d.Ready.Log, Timeout: d.Ready.Timeout}
		}
		spec.Daemons = append(spec.Daemons, sd)
	}
	return spec
}

func envEntries(prefix []string, env map[string]string, sources map[string]manifest.Source) []supervisor.EnvEntry {
	var out []supervisor.EnvEntry
	for _, k := range slices.Sorted(maps.Keys(env)) {
		key := manifest.KeyPath(append(append([]string{}, prefix...), k)...)
		if sources[key] != manifest.Literal {
			out = append(out, supervisor.EnvEntry{Name: k, Secret: key})
			continue
		}
		v := env[k]
		out = append(out, supervisor.EnvEntry{Name: k, Value: &v})
	}
	return out
}

// envSecretKey is the key under which a -e NAME value from the caller's
// environment is delivered (it cannot clash with a manifest key path).
func envSecretKey(name string) string { return "run.env." + name }

// secretValues returns the substituted values the supervisor needs, by key path.
func secretValues(r *manifest.Resolved) map[string]string {
	out := map[string]string{}
	add := func(prefix []string, env map[string]string) {
		for k, v := range env {
			key := manifest.KeyPath(append(append([]string{}, prefix...), k)...)
			if r.Sources[key] != manifest.Literal {
				out[key] = v
			}
		}
	}
	add([]string{"env"}, r.Env)
	for name, d := range r.Daemons {
		add([]string{"daemons", name, "env"}, d.Env)
	}
	return out
}

const (
	// EgressAlias is the egress proxy's name on the sandbox's network.
	EgressAlias = "airlock-egress"
	// EgressPort is the port the egress proxy listens on.
	EgressPort = 3128
)

// ProxyURL is the proxy variables' value inside a sandbox with egress rules.
var ProxyURL = "http://" + EgressAlias + ":" + strconv.Itoa(EgressPort)

// ProxyEnv is the environment that sends HTTP and HTTPS through the proxy: for
// the main command, daemons, execs and services, under the user's own values.
// Loopback and the services' names go direct.
func ProxyEnv(r *manifest.Resolved) map[string]string {
	if r.Sandbox.Egress == nil {
		return nil
	}
	return egress.ClientEnv(ProxyURL, slices.Sorted(maps.Keys(r.Services)))
}

// withProxyEnv puts the proxy variables before entries, so that an entry of the
// same name (the user's) wins.
func withProxyEnv(r *manifest.Resolved, entries []supervisor.EnvEntry) []supervisor.EnvEntry {
	pe := ProxyEnv(r)
	if pe == nil {
		return entries
	}
	out := make([]supervisor.EnvEntry, 0, len(pe)+len(entries))
	for _, k := range slices.Sorted(maps.Keys(pe)) {
		v := pe[k]
		out = append(out, supervisor.EnvEntry{Name: k, Value: &v})
	}
	return append(out, entries...)
}

// BuildSpec is the supervisor's spec for a sandbox whose backend cannot see this
// host's files: no host mounts and no builtin tools' environment.
func BuildSpec(req *Request, r *manifest.Resolved) *supervisor.Spec {
	return SpecWithTools(req, r, nil, nil)
}

// DeliveredValues are the values the supervisor waits for at start, by key: the
// manifest's substituted values and the caller's -e NAME values.
func DeliveredValues(req *Request, r *manifest.Resolved) map[string]string {
	values := secretValues(r)
	for k, v := range req.EnvSecrets {
		values[envSecretKey(k)] = v
	}
	return values
}

// ServiceValues are the substituted values a wrapped service waits for, by key
// path (none when it has no substituted env: then it is not wrapped).
func ServiceValues(name string, r *manifest.Resolved) map[string]string {
	values := map[string]string{}
	for k, key := range ServiceSecretEnv(name, r) {
		values[key] = r.Services[name].Env[k]
	}
	return values
}

// DefaultReadyTimeout applies when sandbox.ready_timeout is empty (the manifest
// defaults it to 60s, so only a hand-made Resolved lacks it).
const DefaultReadyTimeout = 60 * time.Second

// ReadyTimeout is sandbox.ready_timeout of a manifest (60 s when empty): how
// long daemons and required services may take to be ready, and on the
// kubernetes backend the Pod to start.
func ReadyTimeout(r *manifest.Resolved) (time.Duration, error) {
	if r == nil || r.Sandbox.ReadyTimeout == "" {
		return DefaultReadyTimeout, nil
	}
	d, err := time.ParseDuration(r.Sandbox.ReadyTimeout)
	if err != nil || d <= 0 {
		return 0, configErr("sandbox.ready_timeout: invalid duration %q", r.Sandbox.ReadyTimeout)
	}
	return d, nil
}

// ServiceSecretEnv maps a service's substituted env names to their key paths.
func ServiceSecretEnv(name string, r *manifest.Resolved) map[string]string {
	out := map[string]string{}
	for k := range r.Services[name].Env {
		key := manifest.KeyPath("services", name, "env", k)
		if r.Sources[key] != manifest.Literal {
			out[k] = key
		}
	}
	return out
}
