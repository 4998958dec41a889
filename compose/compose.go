//go:build !nocompose

// Package compose reads the services of a compose file (with compose-go: its
// interpolation, profiles, extends and .env) into the tables of airlock's
// [services.<name>], and refuses, by key, service and line, every compose key
// airlock cannot honour. It is a loading stage of the manifest: no Docker, no
// processes.
package compose

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/distribution/reference"
	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v3"
)

// handled are the compose keys of a service airlock honours, or that mean
// nothing to a sandbox whichever way (expose publishes nothing; profiles and
// env_file are consumed by the loading).
var handled = map[string]bool{
	"image": true, "command": true, "entrypoint": true, "environment": true, "env_file": true,
	"healthcheck": true, "user": true, "working_dir": true, "shm_size": true, "extra_hosts": true,
	"networks": true, "volumes": true, "tmpfs": true, "cap_add": true, "cap_drop": true,
	"ulimits": true, "depends_on": true, "profiles": true, "expose": true, "ports": true,
}

// Load reads o.File.
func Load(ctx context.Context, o Options) (*Result, []Error) {
	lines := scanLines(o.Content)
	dir := filepath.Dir(o.File)
	env, err := environment(o)
	if err != nil {
		return nil, []Error{{Msg: err.Error()}}
	}
	load := func(interpolate bool) (*types.Project, error) {
		return loader.LoadWithContext(ctx, types.ConfigDetails{
			WorkingDir:  dir,
			ConfigFiles: []types.ConfigFile{{Filename: o.File, Content: o.Content}},
			Environment: env,
		}, func(lo *loader.Options) {
			lo.SetProjectName("airlock", true)
			lo.Profiles = o.Profiles
			lo.SkipInterpolation = !interpolate
		})
	}
	p, err := load(true)
	if err != nil {
		return nil, []Error{{Msg: fmt.Sprintf("cannot load the compose file: %v", err)}}
	}
	if o.KeepEnvReferences {
		raw, err := load(false)
		if err != nil {
			return nil, []Error{{Msg: fmt.Sprintf("cannot load the compose file: %v", err)}}
		}
		for name, s := range p.Services {
			if r, ok := raw.Services[name]; ok {
				s.Environment = r.Environment
				p.Services[name] = s
			}
		}
	}
	c := &converter{p: p, lines: lines, ignore: o.Ignore, env: env, res: &Result{Services: map[string]any{}, Lines: map[string]int{}}}
	c.raw = func() *types.Project {
		raw, err := load(false)
		if err != nil {
			return nil
		}
		return raw
	}
	names, errs := c.selected(o.Services)
	if len(errs) > 0 {
		return nil, errs
	}
	for _, name := range names {
		c.service(name, p.Services[name], names)
	}
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return c.res, nil
}

// badImage says why a service's image is no image reference and, when the
// compose file's interpolation made it so, which variables were empty.
func (c *converter) badImage(name, img string, err error) string {
	msg := fmt.Sprintf("%q is not an image reference (%v)", img, err)
	raw := c.raw()
	if raw == nil {
		return msg
	}
	written := raw.Services[name].Image
	if written == img || written == "" {
		return msg
	}
	msg = fmt.Sprintf("%q (written %q) is not an image reference (%v)", img, written, err)
	var empty []string
	for _, m := range imageVarRE.FindAllStringSubmatch(written, -1) {
		if v, ok := c.env[m[1]]; !ok || v == "" {
			empty = append(empty, "${"+m[1]+"}")
		}
	}
	if len(empty) > 0 {
		msg += ": " + strings.Join(empty, ", ") + " is empty or not set"
	}
	return msg
}

// imageVarRE finds the variables a compose value names: ${NAME…} and $NAME.
var imageVarRE = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

// environment is what the compose file is interpolated with: its .env, then
// the host environment over it.
func environment(o Options) (types.Mapping, error) {
	env := types.Mapping{}
	if o.DotEnv != nil {
		vars, err := dotenv.ParseWithLookup(bytes.NewReader(o.DotEnv), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %v", filepath.Join(filepath.Dir(o.File), ".env"), err)
		}
		maps.Copy(env, vars)
	}
	for _, kv := range o.Environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	return env, nil
}

type converter struct {
	p      *types.Project
	raw    func() *types.Project // the project loaded without interpolation
	env    types.Mapping
	lines  map[string]int
	ignore []string
	res    *Result
	errs   []Error
}

func (c *converter) line(path ...string) int {
	for n := len(path); n > 0; n-- {
		if l, ok := c.lines[LineKey(path[:n]...)]; ok {
			return l
		}
	}
	return 0
}

func (c *converter) errorf(path []string, format string, args ...any) {
	c.errs = append(c.errs, Error{Line: c.line(path...), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// selected returns the services to take: the named ones and what they depend
// on, or every service of the active profiles.
func (c *converter) selected(want []string) ([]string, []Error) {
	if len(want) == 0 {
		return slices.Sorted(maps.Keys(c.p.Services)), nil
	}
	var errs []Error
	out := map[string]bool{}
	var add func(name string, from []string)
	add = func(name string, from []string) {
		if out[name] {
			return
		}
		s, ok := c.p.Services[name]
		if !ok {
			msg := fmt.Sprintf("%s is not a service of the compose file (services: %s)", name, strings.Join(slices.Sorted(maps.Keys(c.p.Services)), ", "))
			if d, disabled := c.p.DisabledServices[name]; disabled {
				msg = fmt.Sprintf("%s is in profile %s, which is not active (add it to compose.profiles)", name, strings.Join(d.Profiles, ", "))
			}
			errs = append(errs, Error{Line: c.line(from...), Path: from, Msg: msg})
			return
		}
		out[name] = true
		for dep, d := range s.DependsOn {
			if _, ok := c.p.Services[dep]; ok || d.Required {
				add(dep, []string{"services", name, "depends_on"})
			}
		}
	}
	for _, name := range want {
		add(name, []string{})
	}
	return slices.Sorted(maps.Keys(out)), errs
}

// service converts one compose service into a [services.<name>] table.
func (c *converter) service(name string, s types.ServiceConfig, taken []string) {
	if !c.refuseUnhandled(name, s) {
		return
	}
	for _, f := range s.EnvFiles {
		if !slices.Contains(c.res.Files, f.Path) {
			c.res.Files = append(c.res.Files, f.Path)
		}
	}
	t := map[string]any{}
	c.res.Lines[LineKey(servicePath(name)...)] = c.line(servicePath(name)...)
	if s.Image == "" {
		c.errorf(servicePath(name, "image"), "is required: airlock runs a service from an image (build it first)")
	} else if _, err := reference.ParseNormalizedNamed(s.Image); err != nil {
		c.errorf(servicePath(name, "image"), "%s", c.badImage(name, s.Image, err))
	}
	t["image"] = s.Image
	c.at(name, "image", "image")
	if s.Command != nil {
		t["command"] = strs(s.Command)
		c.at(name, "command", "command")
	}
	if s.Entrypoint != nil {
		t["entrypoint"] = strs(s.Entrypoint)
		c.at(name, "entrypoint", "entrypoint")
	}
	c.environment(name, s, t)
	if s.User != "" {
		t["user"] = s.User
		c.at(name, "user", "user")
	}
	if s.WorkingDir != "" {
		t["working_dir"] = s.WorkingDir
		c.at(name, "working_dir", "working_dir")
	}
	if s.ShmSize != 0 {
		t["shm_size"] = strconv.FormatInt(int64(s.ShmSize), 10)
		if n := int64(s.ShmSize); n%(1<<20) == 0 {
			t["shm_size"] = strconv.FormatInt(n>>20, 10) + "m"
		}
		c.at(name, "shm_size", "shm_size")
	}
	if len(s.ExtraHosts) > 0 {
		var hosts []any
		for _, h := range slices.Sorted(maps.Keys(s.ExtraHosts)) {
			for _, ip := range s.ExtraHosts[h] {
				hosts = append(hosts, h+"="+ip)
			}
		}
		t["extra_hosts"] = hosts
		c.at(name, "extra_hosts", "extra_hosts")
	}
	c.ports(name, s, t)
	c.networks(name, s, t)
	c.volumes(name, s, t)
	if len(s.Tmpfs) > 0 {
		t["tmpfs"] = append(anys(t["tmpfs"]), strs(s.Tmpfs)...)
		c.at(name, "tmpfs", "tmpfs")
	}
	if len(s.CapAdd) > 0 {
		t["cap_add"] = strs(s.CapAdd)
		c.at(name, "cap_add", "cap_add")
	}
	if len(s.CapDrop) > 0 {
		t["cap_drop"] = strs(s.CapDrop)
		c.at(name, "cap_drop", "cap_drop")
	}
	c.ulimits(name, s, t)
	c.dependsOn(name, s, t, taken)
	c.healthcheck(name, s, t)
	c.res.Services[name] = t
}

// refuseUnhandled reports every key the service sets that airlock neither
// converts nor was told to ignore (compose.ignore); false when the service
// cannot be read at all.
func (c *converter) refuseUnhandled(name string, s types.ServiceConfig) bool {
	// Every key the service sets, as compose-go writes it back.
	b, err := json.Marshal(s)
	if err != nil {
		c.errorf(servicePath(name), "cannot read service %s: %v", name, err)
		return false
	}
	var set map[string]any
	_ = json.Unmarshal(b, &set)
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if set[k] == nil || handled[k] || slices.Contains(c.ignore, k) {
			continue
		}
		if k == "build" && s.Image != "" {
			// compose builds it; airlock takes the image it names, if the user says so.
			c.errorf(servicePath(name, k), "airlock does not build a compose service's image; build and tag %s before the run, and add \"build\" to compose.ignore to use that image", s.Image)
			continue
		}
		c.errorf(servicePath(name, k), "airlock cannot honour %s in a sandbox's service; remove it, or add %q to compose.ignore to run without it", k, k)
	}
	return true
}

// environment converts environment (and env_file's values) to env.
func (c *converter) environment(name string, s types.ServiceConfig, t map[string]any) {
	if len(s.Environment) > 0 {
		env := map[string]any{}
		for k, v := range s.Environment {
			if v != nil { // a name without a value the host lacks: compose leaves it out
				env[k] = *v
			}
		}
		t["env"] = env
		c.at(name, "env", "environment")
		for k := range env {
			c.res.Lines[LineKey(servicePath(name, "env", k)...)] = c.line(servicePath(name, "environment", k)...)
		}
		if _, ok := c.lines[LineKey(servicePath(name, "environment")...)]; !ok {
			c.at(name, "env", "env_file")
		}
	}
}

// ulimits converts ulimits, a single value as both soft and hard.
func (c *converter) ulimits(name string, s types.ServiceConfig, t map[string]any) {
	if len(s.Ulimits) > 0 {
		u := map[string]any{}
		for n, l := range s.Ulimits {
			if l == nil {
				continue
			}
			if l.Single != 0 {
				u[n] = map[string]any{"soft": int64(l.Single), "hard": int64(l.Single)}
			} else {
				u[n] = map[string]any{"soft": int64(l.Soft), "hard": int64(l.Hard)}
			}
		}
		t["ulimits"] = u
		c.at(name, "ulimits", "ulimits")
	}
}

// dependsOn keeps the dependencies on services that are taken, with their conditions.
func (c *converter) dependsOn(name string, s types.ServiceConfig, t map[string]any, taken []string) {
	if len(s.DependsOn) > 0 {
		d := map[string]any{}
		for dep, cond := range s.DependsOn {
			if !slices.Contains(taken, dep) {
				continue // not required, and not there
			}
			condition := cond.Condition
			if condition == "" {
				condition = "service_started"
			}
			d[dep] = condition
		}
		t["depends_on"] = d
		c.at(name, "depends_on", "depends_on")
	}
}

// healthcheck converts a healthcheck that runs (not disabled, not NONE).
func (c *converter) healthcheck(name string, s types.ServiceConfig, t map[string]any) {
	if h := s.HealthCheck; h != nil && !h.Disable && len(h.Test) > 0 && h.Test[0] != "NONE" {
		hc := map[string]any{}
		switch h.Test[0] {
		case "CMD":
			hc["cmd"] = strs(h.Test[1:])
		case "CMD-SHELL":
			hc["cmd"] = []any{"/bin/sh", "-c", strings.Join(h.Test[1:], " ")}
		default:
			c.errorf(servicePath(name, "healthcheck", "test"), "must start with CMD, CMD-SHELL or NONE, got %q", h.Test[0])
		}
		for k, d := range map[string]*types.Duration{"interval": h.Interval, "timeout": h.Timeout, "start_period": h.StartPeriod, "start_interval": h.StartInterval} {
			if d != nil {
				hc[k] = time.Duration(*d).String()
			}
		}
		if h.Retries != nil {
			hc["retries"] = int64(*h.Retries)
		}
		t["healthcheck"] = hc
		c.at(name, "healthcheck", "healthcheck")
		for k := range hc {
			theirs := k
			if k == "cmd" {
				theirs = "test"
			}
			c.res.Lines[LineKey(servicePath(name, "healthcheck", k)...)] = c.line(servicePath(name, "healthcheck", theirs)...)
		}
	}
}

// servicePath is the key path of k in service name.
func servicePath(name string, k ...string) []string {
	return append([]string{"services", name}, k...)
}

// at records that key ours of service name stands at the line of its key theirs in the compose file.
func (c *converter) at(name, ours string, theirs ...string) {
	c.res.Lines[LineKey(servicePath(name, ours)...)] = c.line(servicePath(name, theirs...)...)
}

// ports turns the ports compose publishes on the host into ports forwarded
// onto the sandbox's loopback: the job that reached them on its runner's
// 127.0.0.1 is the sandbox's main command.
func (c *converter) ports(name string, s types.ServiceConfig, t map[string]any) {
	var ports []any
	p := []string{"services", name, "ports"}
	for _, port := range s.Ports {
		switch {
		case port.Protocol != "" && port.Protocol != "tcp":
			c.errorf(p, "%d/%s: airlock forwards tcp ports only", port.Target, port.Protocol)
			continue
		case port.HostIP != "" && port.HostIP != "127.0.0.1" && port.HostIP != "0.0.0.0" && port.HostIP != "::":
			c.errorf(p, "%s:%s:%d: a service's ports are forwarded onto the sandbox's 127.0.0.1, not %s", port.HostIP, port.Published, port.Target, port.HostIP)
			continue
		}
		if port.Published == "" {
			ports = append(ports, fmt.Sprintf("%d", port.Target))
		} else {
			ports = append(ports, fmt.Sprintf("%s:%d", port.Published, port.Target))
		}
	}
	if len(ports) > 0 {
		t["ports"] = ports
		c.res.Lines[LineKey(p...)] = c.line(p...)
	}
}

// networks collects the aliases a service has on any of its networks: in a
// sandbox every service sits on the sandbox's one network.
func (c *converter) networks(name string, s types.ServiceConfig, t map[string]any) {
	var aliases []any
	for _, net := range slices.Sorted(maps.Keys(s.Networks)) {
		n := s.Networks[net]
		if n == nil {
			continue
		}
		b, _ := json.Marshal(n)
		var set map[string]any
		_ = json.Unmarshal(b, &set)
		for _, k := range slices.Sorted(maps.Keys(set)) {
			if k != "aliases" && !slices.Contains(c.ignore, "networks."+k) {
				c.errorf([]string{"services", name, "networks", net, k}, "airlock cannot honour %s (a sandbox's services share one network, where only aliases apply); remove it, or add %q to compose.ignore", k, "networks."+k)
			}
		}
		for _, a := range n.Aliases {
			if !slices.Contains(aliases, any(a)) {
				aliases = append(aliases, a)
			}
		}
	}
	if len(aliases) > 0 {
		t["aliases"] = aliases
		c.res.Lines[LineKey("services", name, "aliases")] = c.line("services", name, "networks")
	}
}

// volumes turns compose's volumes into airlock's short syntax: binds (their
// sources made absolute by the loader), volumes made for the sandbox, tmpfs.
func (c *converter) volumes(name string, s types.ServiceConfig, t map[string]any) {
	var vols, tmpfs []any
	p := []string{"services", name, "volumes"}
	for _, v := range s.Volumes {
		ro := ""
		if v.ReadOnly {
			ro = ":ro"
		}
		switch v.Type {
		case types.VolumeTypeBind:
			if b := v.Bind; b != nil && (b.Propagation != "" || b.SELinux != "") {
				c.errorf(p, "%s: airlock cannot honour bind propagation or selinux options", v.Target)
			}
			vols = append(vols, v.Source+":"+v.Target+ro)
		case types.VolumeTypeVolume:
			if v.Source == "" {
				vols = append(vols, v.Target)
				continue
			}
			if top, ok := c.p.Volumes[v.Source]; ok && bool(top.External) {
				c.errorf(p, "%s: volume %s is external; airlock makes a sandbox's volumes itself and removes them with it", v.Target, v.Source)
				continue
			}
			vols = append(vols, v.Source+":"+v.Target+ro)
		case types.VolumeTypeTmpfs:
			var opts []string
			if v.Tmpfs != nil && v.Tmpfs.Size > 0 {
				opts = append(opts, fmt.Sprintf("size=%d", int64(v.Tmpfs.Size)))
			}
			if v.Tmpfs != nil && v.Tmpfs.Mode != 0 {
				opts = append(opts, fmt.Sprintf("mode=%o", v.Tmpfs.Mode))
			}
			e := v.Target
			if len(opts) > 0 {
				e += ":" + strings.Join(opts, ",")
			}
			tmpfs = append(tmpfs, e)
		default:
			c.errorf(p, "%s: airlock cannot honour a volume of type %s", v.Target, v.Type)
		}
	}
	if len(vols) > 0 {
		t["volumes"] = vols
		c.res.Lines[LineKey("services", name, "volumes")] = c.line(p...)
	}
	if len(tmpfs) > 0 {
		t["tmpfs"] = tmpfs
		c.res.Lines[LineKey("services", name, "tmpfs")] = c.line(p...)
	}
}

func strs(in []string) []any {
	out := make([]any, len(in))
	for i, s := range in {
		out[i] = s
	}
	return out
}

func anys(v any) []any {
	a, _ := v.([]any)
	return a
}

// scanLines maps the key paths of a YAML document to their lines.
func scanLines(src []byte) map[string]int {
	out := map[string]int{}
	var root yaml.Node
	if yaml.Unmarshal(src, &root) != nil || len(root.Content) == 0 {
		return out
	}
	var walk func(n *yaml.Node, path []string)
	walk = func(n *yaml.Node, path []string) {
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := append(slices.Clone(path), k.Value)
			out[LineKey(p...)] = k.Line
			walk(v, p)
		}
	}
	walk(root.Content[0], nil)
	return out
}

func init() {
	// compose-go reports through logrus (an unset variable, a deprecated key);
	// airlock's errors say what matters, and logrus's lines would break its
	// output format.
	logrus.SetOutput(io.Discard)
}
