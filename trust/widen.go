package trust

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/manifest"
)

// Widening is one way a manifest gives its sandbox more than another did.
type Widening struct {
	// Area is one of Areas: mounts, copies, privileges, user, capabilities,
	// network, ports, egress, tools, presets, env, project, build, ignore,
	// files.
	Area string
	// Detail says what, in key paths and values ("mounts.h: ~ -> /hosthome").
	Detail string
}

// areaOrder is the order areas are told in.
var areaOrder = []string{"mounts", "copies", "privileges", "user", "capabilities", "network", "ports", "egress", "tools", "presets", "env", "project", "build", "ignore", "files"}

// Areas are the areas a Widening names.
var Areas = areaOrder

// Summary is "mounts (mounts.h: ~ -> /hosthome), privileges (sandbox.privileged = true)".
func Summary(ws []Widening) string {
	by := map[string][]string{}
	for _, w := range ws {
		by[w.Area] = append(by[w.Area], w.Detail)
	}
	var parts []string
	for _, a := range areaOrder {
		if d := by[a]; len(d) > 0 {
			parts = append(parts, a+" ("+strings.Join(d, "; ")+")")
		}
	}
	return strings.Join(parts, ", ")
}

// Widens compares two resolved manifests, old then new, and lists every way new
// gives its sandbox more of the host than old: mounts and copies (new, moved
// or now writable), privileged, harden off (the sandbox's or a daemon's), the
// user, added or no longer dropped capabilities, the network, published ports,
// egress (removed, allowed more, another network), tools, presets, values taken
// from the host environment or the vault, the project mode and the build
// context. A nil old is an empty manifest. Narrowing changes are not listed.
func Widens(old, new *manifest.Resolved) []Widening {
	if old == nil {
		old = &manifest.Resolved{}
	}
	if new == nil {
		return nil
	}
	w := &widenings{}
	w.mountsAndCopies(old, new)
	w.services(old, new)
	w.privilegesAndUsers(old, new)
	w.capabilitiesNetworkPorts(old, new)
	w.egress(old, new)
	w.toolsPresetsEnv(old, new)
	w.projectAndBuild(old, new)
	return w.out
}

// widenings collects what a manifest widens, in the order Widens reports it.
type widenings struct{ out []Widening }

func (w *widenings) add(area, format string, args ...any) {
	w.out = append(w.out, Widening{Area: area, Detail: fmt.Sprintf(format, args...)})
}

// mountsAndCopies: host paths mounted or copied in that were not, or wider.
func (w *widenings) mountsAndCopies(old, new *manifest.Resolved) {
	o, n := &old.Manifest, &new.Manifest
	for _, name := range slices.Sorted(maps.Keys(n.Mounts)) {
		nm := n.Mounts[name]
		key := manifest.KeyPath("mounts", name)
		om, had := o.Mounts[name]
		switch {
		case !had:
			w.add("mounts", "%s: %s -> %s%s", key, nm.Source, nm.Target, rw(nm.ReadOnly))
		case om.Source != nm.Source || om.Target != nm.Target:
			w.add("mounts", "%s: %s -> %s%s (was %s -> %s)", key, nm.Source, nm.Target, rw(nm.ReadOnly), om.Source, om.Target)
		case om.ReadOnly && !nm.ReadOnly:
			w.add("mounts", "%s: %s -> %s is now writable", key, nm.Source, nm.Target)
		case om.Missing != nm.Missing && strings.HasPrefix(nm.Missing, "create-"):
			w.add("mounts", "%s: missing = %s (creates its source on the host)", key, nm.Missing)
		case strings.HasPrefix(nm.Missing, "create-") && (om.CreateMode != nm.CreateMode || om.FileContent != nm.FileContent):
			w.add("mounts", "%s: creates its source on the host with another mode or content", key)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(n.Copies)) {
		nc := n.Copies[name]
		key := manifest.KeyPath("copies", name)
		oc, had := o.Copies[name]
		switch {
		case !had:
			w.add("copies", "%s: %s -> %s", key, nc.Source, nc.Target)
		case oc.Source != nc.Source:
			w.add("copies", "%s: %s -> %s (was %s)", key, nc.Source, nc.Target, oc.Source)
		case len(nc.Exclude) < len(oc.Exclude) || !subset(oc.Exclude, nc.Exclude):
			w.add("copies", "%s: exclude %s (was %s)", key, list(nc.Exclude), list(oc.Exclude))
		}
	}
}

// services: a service's host binds, user, env files and capabilities.
func (w *widenings) services(old, new *manifest.Resolved) {
	o, n := &old.Manifest, &new.Manifest
	// A service's bind of a host path is a mount too (services.*.volumes, a
	// compose file's included), and its capabilities are the sandbox's.
	for _, name := range slices.Sorted(maps.Keys(n.Services)) {
		ns, os := n.Services[name], o.Services[name]
		for i, v := range new.Parsed.Services[name].Volumes {
			if e := ns.Volumes[i]; v.Kind == "bind" && !slices.Contains(os.Volumes, e) {
				w.add("mounts", "%s: %s", manifest.KeyPath("services", name, "volumes"), e)
			}
		}
		if ns.User != os.User && (ns.User != "" || !hadService(o, name)) {
			w.add("user", "%s = %q", manifest.KeyPath("services", name, "user"), ns.User)
		}
		for _, f := range ns.EnvFile {
			if !slices.Contains(os.EnvFile, f) {
				w.add("files", "%s reads %s", manifest.KeyPath("services", name, "env_file"), f)
			}
		}
		for _, c := range ns.CapAdd {
			if !containsCap(os.CapAdd, c) {
				w.add("capabilities", "%s %s", manifest.KeyPath("services", name, "cap_add"), c)
			}
		}
		for _, c := range os.CapDrop {
			if !containsCap(ns.CapDrop, c) {
				w.add("capabilities", "%s no longer drops %s", manifest.KeyPath("services", name, "cap_drop"), c)
			}
		}
	}
}

// privilegesAndUsers: privileged, hardening turned off, other users.
func (w *widenings) privilegesAndUsers(old, new *manifest.Resolved) {
	o, n := &old.Manifest, &new.Manifest
	if n.Sandbox.Privileged && !o.Sandbox.Privileged {
		w.add("privileges", "sandbox.privileged = true")
	}
	if !n.Sandbox.Harden && (o.Sandbox.Harden || old.File == "" && len(old.Layers) == 0) {
		w.add("privileges", "sandbox.harden = false")
	}
	for _, name := range slices.Sorted(maps.Keys(n.Daemons)) {
		nd := n.Daemons[name]
		od, had := o.Daemons[name]
		if !nd.Harden && (!had || od.Harden) {
			w.add("privileges", "%s = false", manifest.KeyPath("daemons", name, "harden"))
		}
		if nd.User != "" && (!had || od.User != nd.User) {
			w.add("user", "%s = %q", manifest.KeyPath("daemons", name, "user"), nd.User)
		}
	}
	if n.Sandbox.User != o.Sandbox.User {
		w.add("user", "sandbox.user: %q -> %q", o.Sandbox.User, n.Sandbox.User)
	}
}

// capabilitiesNetworkPorts: capabilities added or no longer dropped, a wider network, new ports.
func (w *widenings) capabilitiesNetworkPorts(old, new *manifest.Resolved) {
	o, n := &old.Manifest, &new.Manifest
	for _, c := range n.Sandbox.CapAdd {
		if !containsCap(o.Sandbox.CapAdd, c) {
			w.add("capabilities", "cap_add %s", c)
		}
	}
	for _, c := range o.Sandbox.CapDrop {
		if !containsCap(n.Sandbox.CapDrop, c) {
			w.add("capabilities", "cap_drop no longer drops %s", c)
		}
	}

	if netRank(n.Sandbox.Network) > netRank(o.Sandbox.Network) ||
		n.Sandbox.Network != o.Sandbox.Network && netRank(n.Sandbox.Network) == 1 && netRank(o.Sandbox.Network) == 1 {
		w.add("network", "sandbox.network: %s -> %s", orDefault(o.Sandbox.Network), n.Sandbox.Network)
	}
	for _, p := range n.Sandbox.Ports {
		if !slices.Contains(o.Sandbox.Ports, p) {
			w.add("ports", "%s", p)
		}
	}
}

// egress: the allowlist removed or widened.
func (w *widenings) egress(old, new *manifest.Resolved) {
	o, n := &old.Manifest, &new.Manifest
	switch oe, ne := o.Sandbox.Egress, n.Sandbox.Egress; {
	case oe != nil && ne == nil:
		w.add("egress", "sandbox.egress removed: every destination is reachable")
	case oe != nil && ne != nil:
		for _, a := range ne.Allow {
			if !slices.Contains(oe.Allow, a) {
				w.add("egress", "allow %s", a)
			}
		}
		if oe.Network != ne.Network {
			w.add("egress", "sandbox.egress.network: %s -> %s", orDefault(oe.Network), ne.Network)
		}
	}
}

// toolsPresetsEnv: new tools and presets, env values taken from the host or the vault.
func (w *widenings) toolsPresetsEnv(old, new *manifest.Resolved) {
	o, n := &old.Manifest, &new.Manifest
	for _, t := range n.Tools {
		if !slices.Contains(o.Tools, t) {
			w.add("tools", "%s", t)
		}
	}
	for _, p := range n.Presets {
		if !slices.Contains(o.Presets, p) {
			w.add("presets", "%s", p)
		}
	}

	ov, nv := substituted(o), substituted(n)
	for _, k := range slices.Sorted(maps.Keys(new.Sources)) {
		src := new.Sources[k]
		if src == manifest.Literal {
			continue
		}
		if old.Sources[k] == src && ov[k] == nv[k] {
			continue
		}
		from := "the host environment"
		if src == manifest.Vault {
			from = "the vault"
		}
		w.add("env", "%s takes a value from %s", k, from)
	}
}

// projectAndBuild: a wider project mode, another build context or Dockerfile.
func (w *widenings) projectAndBuild(old, new *manifest.Resolved) {
	o, n := &old.Manifest, &new.Manifest
	if projRank(n.Sandbox.Project) > projRank(o.Sandbox.Project) {
		w.add("project", "sandbox.project: %s -> %s", orDefault(o.Sandbox.Project), n.Sandbox.Project)
	}
	if nb := n.Sandbox.Build; nb != nil {
		ob := o.Sandbox.Build
		switch {
		case ob == nil:
			w.add("build", "sandbox.build.context = %q", nb.Context)
		case ob.Context != nb.Context:
			w.add("build", "sandbox.build.context: %q -> %q", ob.Context, nb.Context)
		case ob.Dockerfile != nb.Dockerfile:
			w.add("build", "sandbox.build.dockerfile: %q -> %q", ob.Dockerfile, nb.Dockerfile)
		}
	}
}

func hadService(m *manifest.Manifest, name string) bool {
	_, ok := m.Services[name]
	return ok
}

// composeVarRE finds the variables a compose file interpolates: ${NAME…} and
// $NAME, not $$ (a literal $).
var composeVarRE = regexp.MustCompile(`\$\$|\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

func composeVars(data []byte) []string {
	var out []string
	for _, m := range composeVarRE.FindAllSubmatch(data, -1) {
		if len(m[1]) > 0 && !slices.Contains(out, string(m[1])) {
			out = append(out, string(m[1]))
		}
	}
	return out
}

// ComposeVarsWiden compares two contents of a compose file (or a file it
// includes, extends or reads as .env): a variable it now interpolates that it
// did not before takes a value from the host's environment into a service.
func ComposeVarsWiden(name string, old, new []byte) []Widening {
	ov := composeVars(old)
	var out []Widening
	for _, v := range composeVars(new) {
		if !slices.Contains(ov, v) {
			out = append(out, Widening{Area: "env", Detail: fmt.Sprintf("%s now reads ${%s} from the host environment", name, v)})
		}
	}
	return out
}

// IgnoreWidens compares two .airlockignore contents: a pattern no longer
// there, or a new exception (!pattern), lets more of the project be copied in.
func IgnoreWidens(old, new []byte) []Widening {
	ol, nl := ignoreLines(old), ignoreLines(new)
	var out []Widening
	for _, l := range ol {
		if !strings.HasPrefix(l, "!") && !slices.Contains(nl, l) {
			out = append(out, Widening{Area: "ignore", Detail: ".airlockignore no longer leaves out " + l})
		}
	}
	for _, l := range nl {
		if strings.HasPrefix(l, "!") && !slices.Contains(ol, l) {
			out = append(out, Widening{Area: "ignore", Detail: ".airlockignore now copies " + l[1:]})
		}
	}
	return out
}

func ignoreLines(data []byte) []string {
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// Load resolves the manifest at file as it was when files were read: each
// layer is served from files (one not there is read from disk), and every
// ${VAR} the host environment lacks stands for a marker of its name, so
// that no vault is opened and two loads compare by the names they use.
func Load(l manifest.Loader, file string, files map[string]File) (*manifest.Resolved, error) {
	l.ReadFile = func(p string) ([]byte, error) {
		f, ok := files[clean(p)]
		switch {
		case !ok:
			return os.ReadFile(p)
		case f.Absent:
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		case !f.Stored():
			return nil, fmt.Errorf("cannot compare %s: it is larger than %d bytes", p, MaxStored)
		}
		return bytes.Clone(f.Content), nil
	}
	l.Vault = markerVault{}
	return l.Load(file)
}

// Read resolves the manifest at file from disk as Load does (no vault is
// opened: every ${VAR} the host environment lacks stands for a marker) and
// returns the snapshot of the layers it read.
func Read(l manifest.Loader, file string) (*manifest.Resolved, *Snapshot, error) {
	snap := NewSnapshot()
	l.ReadFile = snap.ReadFile
	l.Vault = markerVault{}
	r, err := l.Load(file)
	return r, snap, err
}

type markerVault struct{}

func (markerVault) Lookup(name string) (string, bool, error) {
	return "<value of " + name + ">", true, nil
}

// substituted maps the key paths of values that may be substituted to the values.
func substituted(m *manifest.Manifest) map[string]string {
	out := map[string]string{manifest.KeyPath("sandbox", "image"): m.Sandbox.Image}
	for k, v := range m.Env {
		out[manifest.KeyPath("env", k)] = v
	}
	for name, mt := range m.Mounts {
		out[manifest.KeyPath("mounts", name, "source")] = mt.Source
	}
	for name, c := range m.Copies {
		out[manifest.KeyPath("copies", name, "source")] = c.Source
	}
	for name, d := range m.Daemons {
		for k, v := range d.Env {
			out[manifest.KeyPath("daemons", name, "env", k)] = v
		}
	}
	for name, s := range m.Services {
		for k, v := range s.Env {
			out[manifest.KeyPath("services", name, "env", k)] = v
		}
	}
	return out
}

func rw(readOnly bool) string {
	if readOnly {
		return " (read-only)"
	}
	return ""
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func list(s []string) string {
	if len(s) == 0 {
		return "[]"
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func containsCap(caps []string, c string) bool {
	norm := func(s string) string { return strings.TrimPrefix(strings.ToUpper(s), "CAP_") }
	return slices.ContainsFunc(caps, func(x string) bool { return norm(x) == norm(c) || norm(x) == "ALL" })
}

// netRank orders networks by what they reach: none, then bridge (or a named
// one), then the host's.
func netRank(n string) int {
	switch n {
	case "none":
		return 0
	case "host":
		return 2
	}
	return 1
}

// projRank: a copied project cannot write the host's; a bound one can.
func projRank(p string) int {
	if p == "copy" {
		return 0
	}
	return 1
}

func orDefault(s string) string {
	if s == "" {
		return `""`
	}
	return s
}
