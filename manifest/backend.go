package manifest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The backends a sandbox runs on (the user's choice: config.toml's
// runtime.backend, --backend, AIRLOCK_BACKEND).
const (
	BackendDocker     = "docker"
	BackendKubernetes = "kubernetes"
)

// Backend is the backend a manifest is checked for, with the settings that
// change what it accepts.
type Backend struct {
	Name string // BackendDocker ("" too) or BackendKubernetes
	// AllowPrivileged lets sandbox.privileged make a privileged Pod
	// (config.toml's kubernetes.allow_privileged).
	AllowPrivileged bool
}

// CheckBackend returns what in r cannot mean anything on backend b: config
// errors (Errors, each naming its key path, the backend and what to do
// instead; nil when there is none), and warnings for what b skips. The Docker
// backend takes every valid manifest.
func CheckBackend(r *Resolved, b Backend) (warnings []string, err error) {
	switch b.Name {
	case "", BackendDocker:
		return nil, nil
	case BackendKubernetes:
		return checkKubernetes(r, b)
	}
	return nil, fmt.Errorf("cannot check the manifest for backend %q: unknown backend (want %s or %s)", b.Name, BackendDocker, BackendKubernetes)
}

// checkKubernetes: a sandbox is a Pod on some node of a cluster, which has
// none of this host's files, ports or network, and no image builder.
func checkKubernetes(r *Resolved, b Backend) ([]string, error) {
	var errs Errors
	var warnings []string
	errorf := func(path []string, format string, args ...any) {
		errs = append(errs, locate(r.origins, path, fmt.Sprintf(format, args...)))
	}
	s := &r.Sandbox
	sp := func(k ...string) []string { return append([]string{"sandbox"}, k...) }
	if s.Build != nil {
		errorf(sp("build"), "cannot build an image on the kubernetes backend (a cluster has no builder airlock can use); build the image, push it to a registry the cluster pulls from, and set sandbox.image to it")
	}
	if s.Egress != nil {
		errorf(sp("egress"), "is not supported on the kubernetes backend yet (airlock has no egress proxy for a Pod); remove [sandbox.egress] for this backend (in sandbox.local.toml, say) and restrict the Pod's egress with the cluster's NetworkPolicy")
	}
	switch {
	case s.User == HostUser:
		errorf(sp("user"), "\"host\" cannot be used on the kubernetes backend: it gives the sandbox this host's uid so that files written into the project and host caches stay yours, but a Pod has neither (the project is copied in, host mounts are refused), and airlock cannot add the account to the image before the Pod starts; use a numeric \"uid:gid\", e.g. \"1000:1000\"")
	case s.User != "" && !numericUser(s.User):
		errorf(sp("user"), "%q is not numeric: the kubernetes backend runs the container as a uid (runAsUser), not a name; use \"uid\" or \"uid:gid\", e.g. \"1000:1000\"", s.User)
	}
	for _, key := range DaemonUsersBeside(r) {
		warnings = append(warnings, fmt.Sprintf("%s: names another user than sandbox.user %q, so the Pod's main container runs as root (runAsUser 0) and its PID 1 starts the main command, exec and the shell as sandbox.user: a namespace that enforces the restricted Pod Security level (runAsNonRoot) refuses such a Pod; leave this daemon's user empty (the sandbox user) to keep the container non-root", key, s.User))
	}
	if s.Privileged && !b.AllowPrivileged {
		errorf(sp("privileged"), "a privileged Pod is refused on the kubernetes backend unless config.toml allows it; set allow_privileged = true under [kubernetes] in config.toml (when the cluster admits privileged Pods), or drop sandbox.privileged and add only the capabilities needed with sandbox.cap_add")
	}
	if s.Network == "host" {
		errorf(sp("network"), "\"host\" cannot be used on the kubernetes backend (it would be a cluster node's network, not this host's); use \"bridge\" (the Pod's own network) or \"none\"")
	}
	if len(s.ExtraHosts) > 0 {
		errorf(sp("extra_hosts"), "is not supported on the kubernetes backend yet; remove it for this backend (in sandbox.local.toml, say)")
	}
	if len(s.Ports) > 0 {
		errorf(sp("ports"), "cannot publish ports on the kubernetes backend (the Pod runs on a cluster node, not on this host); leave sandbox.ports empty for this backend and reach a port with kubectl port-forward")
	}
	if s.Project == "bind" {
		errorf(sp("project"), "\"bind\" cannot be used on the kubernetes backend (the cluster's nodes do not have this host's files); use \"auto\" or \"copy\": the project is copied into the Pod")
	}
	for _, name := range slices.Sorted(maps.Keys(r.Mounts)) {
		if r.Mounts[name].Missing == "ignore" {
			warnings = append(warnings, fmt.Sprintf("%s: skipped on the kubernetes backend: the cluster's nodes do not have this host's files (missing = \"ignore\")", KeyPath("mounts", name)))
			continue
		}
		errorf([]string{"mounts", name, "source"}, "a host path cannot be mounted on the kubernetes backend (the cluster's nodes do not have this host's files); copy it in with [%s] instead, or set missing = \"ignore\" to skip the mount on this backend", KeyPath("copies", name))
	}
	for _, name := range slices.Sorted(maps.Keys(r.Services)) {
		svc := r.Services[name]
		for _, k := range unsupportedOnKubernetes(svc) {
			errorf([]string{"services", name, k}, "is not supported on the kubernetes backend yet (a service there is a sidecar container of the sandbox's Pod); remove it for this backend (in sandbox.local.toml, say)")
		}
		if h := svc.Healthcheck; h != nil && (h.StartPeriod != "" || h.StartInterval != "") {
			warnings = append(warnings, fmt.Sprintf("%s: start_period and start_interval are ignored on the kubernetes backend (the startup probe retries every interval)", KeyPath("services", name, "healthcheck")))
		}
		if len(svc.Command) > 0 || len(svc.Entrypoint) > 0 {
			continue
		}
		var substituted []string
		for _, k := range slices.Sorted(maps.Keys(svc.Env)) {
			if r.Sources[KeyPath("services", name, "env", k)] != Literal {
				substituted = append(substituted, k)
			}
		}
		if len(substituted) > 0 {
			errorf([]string{"services", name, "command"}, "is required on the kubernetes backend when the service's env takes ${VAR} values (%s): airlock starts such a service through a wrapper, which must be given its command (on a cluster airlock cannot read the image's entrypoint and command); set services.%s.command", strings.Join(substituted, ", "), KeyPath(name))
		}
	}
	for _, t := range r.Tools {
		warnings = append(warnings, fmt.Sprintf("tools.%s: skipped on the kubernetes backend: the cluster's nodes do not have this host's files", t))
	}
	return warnings, errs.orNil()
}

// DaemonUsersBeside returns the keys (daemons.<name>.user, sorted) of the
// daemons that name another user than a numeric sandbox.user other than root,
// as far as the manifest alone tells: a name, another uid or gid, or the same
// uid with a gid where sandbox.user has none (or the other way round). Their
// supervisor must run as root beside the sandbox user (what the kubernetes
// backend does for them; the Docker backend decides with the image's
// accounts, so "nobody" and "65534" are one user there). None for an empty,
// named or root sandbox.user.
func DaemonUsersBeside(r *Resolved) []string {
	su := r.Sandbox.User
	if !numericUser(su) {
		return nil
	}
	uid, gid, hasGID := strings.Cut(su, ":")
	if strings.Trim(uid, "0") == "" {
		return nil // root
	}
	var keys []string
	for _, name := range slices.Sorted(maps.Keys(r.Daemons)) {
		du := r.Daemons[name].User
		if du == "" || du == su {
			continue
		}
		duid, dgid, dHasGID := strings.Cut(du, ":")
		if numericUser(du) && sameID(duid, uid) && dHasGID == hasGID && sameID(dgid, gid) {
			continue
		}
		keys = append(keys, KeyPath("daemons", name, "user"))
	}
	return keys
}

// sameID reports whether two decimal ids are the same number ("0100" and "100").
func sameID(a, b string) bool {
	return strings.TrimLeft(a, "0") == strings.TrimLeft(b, "0")
}

// numericUser reports whether a user is "uid" or "uid:gid", what a Pod's
// runAsUser and runAsGroup take.
func numericUser(u string) bool {
	uid, gid, hasGID := strings.Cut(u, ":")
	return digits(uid) && (!hasGID || digits(gid))
}

func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// unsupportedOnKubernetes lists the keys of a service the kubernetes backend
// cannot honour yet.
func unsupportedOnKubernetes(s Service) []string {
	var keys []string
	for _, k := range []struct {
		key string
		set bool
	}{
		{"user", s.User != ""}, {"shm_size", s.ShmSize != ""}, {"extra_hosts", len(s.ExtraHosts) > 0},
		{"aliases", len(s.Aliases) > 0}, {"volumes", len(s.Volumes) > 0}, {"tmpfs", len(s.Tmpfs) > 0},
		{"cap_add", len(s.CapAdd) > 0}, {"cap_drop", len(s.CapDrop) > 0}, {"ulimits", len(s.Ulimits) > 0},
		{"depends_on", len(s.DependsOn) > 0}, {"ports", remappedPorts(s.Ports)},
		{"loopback", s.Loopback == LoopbackForwarded}, // a Pod's containers share one namespace
	} {
		if k.set {
			keys = append(keys, k.key)
		}
	}
	return keys
}

// remappedPorts reports whether a service forwards a port onto another
// number: in a Pod its sidecars share the sandbox's loopback already, where a
// port keeps its number.
func remappedPorts(ports []string) bool {
	for _, e := range ports {
		if p, err := parseServicePort(e); err == nil && p.Listen != p.Port {
			return true
		}
	}
	return false
}
