package docker

import (
	"maps"
	"slices"

	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/mount"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/versions"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// Services (design.md §7) are sibling containers on the sandbox network, reachable by
// their name. Required services gate Start: each must be healthy (running, for a
// service without a healthcheck) within sandbox.ready_timeout. Optional ones start
// alongside and report their first result as a notice, in the background.

const (
	// servicePollInterval is how often a starting service's state is inspected.
	servicePollInterval = 50 * time.Millisecond
	// serviceLogLines is how many of its last log lines a failed service shows.
	serviceLogLines = 20
)

// serviceName is the Docker name of a service container.
func serviceName(sandboxID, service string) string {
	return objectName(sandboxID) + "-" + service
}

// services run a sandbox's services: the Engine, the owner key their objects
// carry, the channel that delivers a wrapped service's values, where notices go
// and who hears each service's first result (onService).
type services struct {
	engine    client.APIClient
	owner     ownerKey
	channel   execChannel
	notice    func(format string, args ...any)
	onService func(sandboxID, service string, ready bool, detail string)
}

// services are the runtime's services.
func (rt *Runtime) services() *services {
	return &services{engine: rt.Engine, owner: ownerKey(rt.Owner), channel: execChannel{engine: rt.Engine},
		notice: rt.notice, onService: rt.OnService}
}

// create creates one container per service on the sandbox network.
func (s *services) create(ctx context.Context, sb *backend.Sandbox, r *manifest.Resolved, labels map[string]string, binds serviceBinds) error {
	if len(r.Services) == 0 {
		return nil
	}
	if sb.Network == "" {
		return configErr("services need sandbox.network = \"bridge\", not %q", r.Sandbox.Network)
	}
	if err := s.ensureVolumes(ctx, sb, r, labels); err != nil {
		return err
	}
	// The Engine takes a healthcheck's start_interval from API 1.44 (Docker 25).
	startInterval := !versions.LessThan(s.engine.ClientVersion(), "1.44")
	for _, name := range slices.Sorted(maps.Keys(r.Services)) {
		// A resolved manifest holds enabled entries only.
		secretEnv := backend.ServiceSecretEnv(name, r)
		cfg, err := serviceConfig(name, r.Services[name], copyLabels(labels, backend.LabelRole, "service", backend.LabelService, name), secretEnv, startInterval)
		if err != nil {
			return err
		}
		// Behind egress rules a service goes out through the proxy too, unless
		// its own env says otherwise.
		pe := backend.ProxyEnv(r)
		for _, k := range slices.Sorted(maps.Keys(pe)) {
			if _, own := r.Services[name].Env[k]; !own {
				cfg.Env = append(cfg.Env, k+"="+pe[k])
			}
		}
		host := &container.HostConfig{NetworkMode: container.NetworkMode(sb.Network), DNS: egressDNS(sb)}
		netcfg := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			sb.Network: {Aliases: append([]string{name}, r.Services[name].Aliases...)},
		}}
		if r.Services[name].SharesLoopback() {
			// In the primary's network namespace: its address, DNS, hosts
			// file and name; the primary's endpoint carries the aliases.
			host.NetworkMode, host.DNS, netcfg = container.NetworkMode("container:"+sb.PrimaryID), nil, nil
			cfg.Hostname = ""
		}
		if err := serviceHost(name, r.Services[name], r.Parsed.Services[name], sb.ID, binds[name], host); err != nil {
			return err
		}
		host.CapDrop = egressCapDrop(r, host.CapAdd, host.CapDrop)
		if len(secretEnv) > 0 {
			if err := s.wrap(ctx, sb, name, r.Services[name], cfg, host, secretEnv); err != nil {
				return err
			}
		}
		c, err := s.engine.ContainerCreate(context.WithoutCancel(ctx), cfg, host, netcfg, nil, serviceName(sb.ID, name)) // as the primary's
		if err != nil {
			return failed("cannot create service %s: %v", name, err)
		}
		sb.Services[name] = c.ID
	}
	return nil
}

// serviceConfig is the container config of one service.
// An entrypoint replaces the image's ENTRYPOINT and, as in compose, its CMD
// too: the command is then the service's command or none. startInterval says
// the Engine takes a healthcheck's start_interval; an older one probes at the
// start_interval throughout when one is set (a sandbox's services live for one
// job, where a fast start matters more than a slower probe later).
func serviceConfig(name string, s manifest.Service, labels map[string]string, secretEnv map[string]string, startInterval bool) (*container.Config, error) {
	cfg := &container.Config{Image: s.Image, Labels: labels, User: s.User, WorkingDir: s.WorkingDir}
	if len(name) <= 63 { // a host name's limit
		cfg.Hostname = name
	}
	if len(s.Entrypoint) > 0 {
		cfg.Entrypoint = slices.Clone(s.Entrypoint)
		cfg.Cmd = []string{}
	}
	if len(s.Command) > 0 {
		cfg.Cmd = append([]string(nil), s.Command...)
	}
	// Only literal values sit in the container config; substituted ones (host
	// environment or vault) reach the service through wrap.
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if _, secret := secretEnv[k]; !secret {
			cfg.Env = append(cfg.Env, k+"="+s.Env[k])
		}
	}
	if h := s.Healthcheck; h != nil && len(h.Cmd) > 0 {
		hc := &container.HealthConfig{Test: append([]string{"CMD"}, h.Cmd...), Retries: h.Retries}
		for _, d := range []struct {
			key string
			val string
			dst *time.Duration
		}{{"interval", h.Interval, &hc.Interval}, {"timeout", h.Timeout, &hc.Timeout}, {"start_period", h.StartPeriod, &hc.StartPeriod}, {"start_interval", h.StartInterval, &hc.StartInterval}} {
			if d.val == "" {
				continue
			}
			v, err := time.ParseDuration(d.val)
			if err != nil || v < 0 {
				return nil, configErr("%s: invalid duration %q", manifest.KeyPath("services", name, "healthcheck", d.key), d.val)
			}
			// The Engine refuses intervals and timeouts below 1ms (0 means its default).
			if v > 0 && v < time.Millisecond {
				v = time.Millisecond
			}
			*d.dst = v
		}
		if hc.StartInterval > 0 && !startInterval {
			if hc.Interval == 0 || hc.StartInterval < hc.Interval {
				hc.Interval = hc.StartInterval
			}
			hc.StartInterval = 0
		}
		cfg.Healthcheck = hc
	}
	return cfg, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// wrap makes a service with substituted env values start through
// `airlock supervise wrap`, from the injected supervisor volume: it waits for the
// values on a socket on the service's tmpfs (deliverSecrets hands them over
// through the Engine API), sets them, and execs the image's entrypoint and command. The container config keeps only names
// and key paths, so docker inspect never shows a value.
func (s *services) wrap(ctx context.Context, sb *backend.Sandbox, name string, svc manifest.Service, cfg *container.Config, host *container.HostConfig, secretEnv map[string]string) error {
	img, err := s.engine.ImageInspect(ctx, svc.Image)
	if err != nil {
		return failed("cannot inspect the image of service %s: %v", name, err)
	}
	var argv []string
	switch {
	case len(svc.Entrypoint) > 0:
		argv = append(argv, svc.Entrypoint...)
	case img.Config != nil:
		argv = append(argv, img.Config.Entrypoint...)
	}
	switch {
	case len(svc.Command) > 0:
		argv = append(argv, svc.Command...)
	case len(svc.Entrypoint) == 0 && img.Config != nil:
		argv = append(argv, img.Config.Cmd...)
	}
	if len(argv) == 0 {
		return configErr("%s: the image %s has no entrypoint or command; set command", manifest.KeyPath("services", name), svc.Image)
	}
	entry := []string{backend.SupervisorIn, "supervise", "wrap", "--socket", backend.SecretsSocketIn}
	for _, k := range slices.Sorted(maps.Keys(secretEnv)) {
		entry = append(entry, "--env", k+"="+secretEnv[k])
	}
	cfg.Entrypoint = append(append(entry, "--"), argv...)
	cfg.Cmd = []string{}
	host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeVolume, Source: ownState(sb).supervisorVolume, Target: backend.BinMount, ReadOnly: true})
	if host.Tmpfs == nil {
		host.Tmpfs = map[string]string{}
	}
	host.Tmpfs[backend.RunMount] = "mode=1777,size=1m"
	return nil
}

// deliverSecrets hands a wrapped service its values once it runs (its
// wrapper waits for them before the service's own command starts).
func (s *services) deliverSecrets(ctx context.Context, sb *backend.Sandbox, name string) error {
	r := ownState(sb).manifest
	if r == nil {
		return nil
	}
	secretEnv := backend.ServiceSecretEnv(name, r)
	if len(secretEnv) == 0 {
		return nil
	}
	values := map[string]string{}
	for k, key := range secretEnv {
		values[key] = r.Services[name].Env[k]
	}
	if err := backend.DeliverValues(ctx, s.channel, sb.Services[name], values); err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	return nil
}

// result reports a service's first result to onService, if set.
func (s *services) result(sandboxID, service string, ready bool, detail string) {
	if s.onService != nil {
		s.onService(sandboxID, service, ready, detail)
	}
}
