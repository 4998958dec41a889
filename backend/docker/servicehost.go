package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/go-units"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/supervisor"
)

// serviceBinds are the bind sources of every service's volumes, checked on this
// host before any Engine object exists (hostPlanner.plan): service name → volume entry
// → absolute host path.
type serviceBinds map[string]map[string]string

// planServiceBinds checks the bind sources of services.*.volumes: a path on this
// host (relative to the project dir), which must exist (a typo does not make a
// root-owned folder, as `docker run -v` would) and which a remote Engine cannot see.
func (p *hostPlanner) planServiceBinds(r *manifest.Resolved, remote bool) (serviceBinds, error) {
	out := serviceBinds{}
	for _, name := range slices.Sorted(maps.Keys(r.Services)) {
		for i, v := range r.Parsed.Services[name].Volumes {
			if v.Kind != "bind" {
				continue
			}
			e := r.Services[name].Volumes[i]
			src := p.expandHost(v.Source, r.ProjectDir)
			key := manifest.KeyPath("services", name, "volumes")
			if remote {
				return nil, configErr("%s: %s is a path on this host, and the Engine at %s cannot see it (use a named volume, or run on a local Engine)", key, src, p.engineName)
			}
			if _, err := os.Stat(src); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil, configErr("%s: %q: %s does not exist", key, e, src)
				}
				return nil, configErr("%s: %q: cannot use %s: %v", key, e, src, err)
			}
			if out[name] == nil {
				out[name] = map[string]string{}
			}
			out[name][e] = src
		}
	}
	return out, nil
}

// serviceVolumeName is the Engine name of a named volume of a sandbox's services.
func serviceVolumeName(sandboxID, vol string) string {
	return objectName(sandboxID) + "-" + vol
}

// serviceHost adds what services.<name> (s, and its values read, vals) asks of
// the Engine beyond the network to host: volumes (binds from binds, named
// volumes made for the sandbox by ensureVolumes, anonymous ones),
// tmpfs, shm_size, extra_hosts, cap_add/cap_drop and ulimits.
func serviceHost(name string, s manifest.Service, vals manifest.ServiceValues, sandboxID string, binds map[string]string, host *container.HostConfig) error {
	key := func(k string) string { return manifest.KeyPath("services", name, k) }
	for i, v := range vals.Volumes {
		m := mount.Mount{Target: v.Target, ReadOnly: v.ReadOnly}
		switch v.Kind {
		case "bind":
			m.Type, m.Source = mount.TypeBind, binds[s.Volumes[i]]
		case "volume":
			m.Type, m.Source = mount.TypeVolume, serviceVolumeName(sandboxID, v.Source)
		default:
			m.Type = mount.TypeVolume
		}
		host.Mounts = append(host.Mounts, m)
	}
	for _, t := range vals.Tmpfs {
		if host.Tmpfs == nil {
			host.Tmpfs = map[string]string{}
		}
		host.Tmpfs[t.Target] = t.Options
	}
	host.ShmSize = vals.ShmSize
	for _, h := range vals.ExtraHosts {
		host.ExtraHosts = append(host.ExtraHosts, h.String())
	}
	add, err := manifest.NormalizeCapabilities(s.CapAdd)
	if err != nil {
		return configErr("%s: %v", key("cap_add"), err)
	}
	drop, err := manifest.NormalizeCapabilities(s.CapDrop)
	if err != nil {
		return configErr("%s: %v", key("cap_drop"), err)
	}
	host.CapAdd = add
	host.CapDrop = append(host.CapDrop, drop...)
	for _, n := range slices.Sorted(maps.Keys(s.Ulimits)) {
		u := s.Ulimits[n]
		host.Ulimits = append(host.Ulimits, &units.Ulimit{Name: n, Soft: u.Soft, Hard: u.Hard})
	}
	return nil
}

// ensureVolumes makes the named volumes the services of a sandbox use,
// labelled with the sandbox so that Remove takes them away with it.
func (s *services) ensureVolumes(ctx context.Context, sb *backend.Sandbox, r *manifest.Resolved, labels map[string]string) error {
	made := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(r.Services)) {
		for _, v := range r.Parsed.Services[name].Volumes {
			if v.Kind != "volume" || made[v.Source] {
				continue
			}
			made[v.Source] = true
			vl := copyLabels(labels, backend.LabelRole, "volume")
			if _, err := s.engine.VolumeCreate(ctx, volume.CreateOptions{Name: serviceVolumeName(sb.ID, v.Source), Labels: vl}); err != nil {
				return failed("cannot create volume %s of service %s: %v", v.Source, name, err)
			}
		}
	}
	return nil
}

// removeVolumes removes the named volumes made for a sandbox's services; the
// containers that use them must be gone.
func (s *services) removeVolumes(ctx context.Context, id string) error {
	resp, err := s.engine.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", backend.LabelSandbox+"="+id))})
	if err != nil {
		return err
	}
	var errs []error
	for _, v := range resp.Volumes {
		if v == nil || !s.owner.owns(v.Labels) {
			continue
		}
		if err := s.engine.VolumeRemove(ctx, v.Name, true); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("cannot remove volume %s: %w", v.Name, err))
		}
	}
	return errors.Join(errs...)
}

// LabelHold marks, on a sandbox's primary, a supervisor that holds at each
// start until the services that share its network namespace are ready.
const LabelHold = "dev.airlock.hold"

// sharedServices are the services that run in the sandbox's network namespace
// (manifest.Service.SharesLoopback), sorted.
func sharedServices(r *manifest.Resolved) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(r.Services)) {
		if r.Services[name].SharesLoopback() {
			out = append(out, name)
		}
	}
	return out
}

// sharedAliases are the names of the services in the sandbox's network
// namespace and their aliases: the primary's aliases on the sandbox network,
// where those services are reached.
func sharedAliases(r *manifest.Resolved) []string {
	var out []string
	for _, name := range sharedServices(r) {
		out = append(out, name)
		out = append(out, r.Services[name].Aliases...)
	}
	return out
}

// holdSeconds bounds a held supervisor's wait for its release: the services'
// ready_timeout and a margin for their starts.
func holdSeconds(r *manifest.Resolved) int {
	d, err := backend.ReadyTimeout(r)
	if err != nil {
		d = backend.DefaultReadyTimeout
	}
	return int(d/time.Second) + 60
}

// serviceForwards are the supervisor's forwards of services.*.ports of the
// services that keep a network namespace of their own: each service's port on
// the sandbox's 127.0.0.1, reached by the service's name on the sandbox's
// network. (A Pod's sidecars share its loopback: the kubernetes backend needs
// none.)
func serviceForwards(r *manifest.Resolved) []supervisor.Forward {
	var out []supervisor.Forward
	for _, name := range slices.Sorted(maps.Keys(r.Services)) {
		if r.Services[name].SharesLoopback() {
			continue // its ports are the sandbox's own
		}
		for _, p := range r.Parsed.Services[name].Ports {
			out = append(out, supervisor.Forward{Listen: fmt.Sprintf("127.0.0.1:%d", p.Listen), To: fmt.Sprintf("%s:%d", name, p.Port)})
		}
	}
	return out
}
