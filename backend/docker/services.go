package docker

import (
	"maps"
	"slices"

	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/mount"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/versions"
	"github.com/docker/docker/pkg/stdcopy"

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

// createServices creates one container per service on the sandbox network.
func (rt *Runtime) createServices(ctx context.Context, sb *backend.Sandbox, r *manifest.Resolved, labels map[string]string, binds serviceBinds) error {
	if len(r.Services) == 0 {
		return nil
	}
	if sb.Network == "" {
		return configErr("services need sandbox.network = \"bridge\", not %q", r.Sandbox.Network)
	}
	if err := rt.ensureServiceVolumes(ctx, sb, r, labels); err != nil {
		return err
	}
	// The Engine takes a healthcheck's start_interval from API 1.44 (Docker 25).
	startInterval := !versions.LessThan(rt.Engine.ClientVersion(), "1.44")
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
			if err := rt.wrapService(ctx, sb, name, r.Services[name], cfg, host, secretEnv); err != nil {
				return err
			}
		}
		c, err := rt.Engine.ContainerCreate(ctx, cfg, host, netcfg, nil, serviceName(sb.ID, name))
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
	// environment or vault) reach the service through wrapService.
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

// startServices starts the service containers and waits for the required ones.
func (rt *Runtime) startServices(ctx context.Context, sb *backend.Sandbox) error {
	if len(sb.Services) == 0 {
		return nil
	}
	timeout, err := backend.ReadyTimeout(ownState(sb).manifest)
	if err != nil {
		return err
	}
	var declared map[string]manifest.Service
	if ownState(sb).manifest != nil {
		declared = ownState(sb).manifest.Services
	}
	// A service the manifest no longer names (a sandbox opened with a newer
	// manifest) is required, as services are by default.
	required := func(name string) bool {
		s, known := declared[name]
		return !known || s.Required
	}
	// What other services wait for: the condition each service must reach.
	// A service others wait to complete is a job: its exit 0 is its success.
	conds := map[string]string{}
	for _, s := range declared {
		for dep, c := range s.DependsOn {
			if _, ok := sb.Services[dep]; ok && (conds[dep] == "" || c != manifest.ServiceStarted) {
				conds[dep] = c
			}
		}
	}
	timeoutText := timeout.String()
	if ownState(sb).manifest != nil && ownState(sb).manifest.Sandbox.ReadyTimeout != "" {
		timeoutText = ownState(sb).manifest.Sandbox.ReadyTimeout
	}
	// A service has ready_timeout from the end of its start.
	startedAt := map[string]time.Time{}
	watch := func(name string) *serviceWatch {
		w := &serviceWatch{rt: rt, sandbox: sb.ID, name: name, id: sb.Services[name], primary: sb.PrimaryID, timeout: timeoutText, deadline: startedAt[name].Add(timeout),
			job: conds[name] == manifest.ServiceCompletedSuccessfully}
		if s, ok := declared[name]; ok && s.Healthcheck != nil {
			w.probe = strings.Join(s.Healthcheck.Cmd, " ")
		}
		return w
	}

	// Start in waves: every service whose dependencies reached their
	// conditions, all at once (a slow one does not hold the others back).
	done := map[string]bool{}   // started, and its condition (if any) reached
	waited := map[string]bool{} // its readiness was already waited for and reported
	var started []string
	for left := slices.Sorted(maps.Keys(sb.Services)); len(left) > 0; {
		var wave, rest []string
		for _, name := range left {
			ready := true
			for dep := range declared[name].DependsOn {
				if _, ok := sb.Services[dep]; ok && !done[dep] {
					ready = false
				}
			}
			if ready {
				wave = append(wave, name)
			} else {
				rest = append(rest, name)
			}
		}
		if len(wave) == 0 { // validate refuses cycles; a hand-made manifest may not
			return configErr("services: depends_on has a cycle among %s", strings.Join(rest, ", "))
		}
		left = rest
		errs := make([]error, len(wave))
		var wg sync.WaitGroup
		for i, name := range wave {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := rt.Engine.ContainerStart(ctx, sb.Services[name], container.StartOptions{}); err != nil {
					errs[i] = fmt.Errorf("cannot start service %s: %v", name, err)
					return
				}
				errs[i] = rt.deliverServiceSecrets(ctx, sb, name)
			}()
		}
		wg.Wait()
		now := time.Now()
		var startErrs []error
		var gate []*serviceWatch
		for i, name := range wave {
			startedAt[name] = now
			switch {
			case errs[i] == nil:
				started = append(started, name)
				if c := conds[name]; c == manifest.ServiceHealthy || c == manifest.ServiceCompletedSuccessfully {
					gate = append(gate, watch(name))
					waited[name] = true
				}
			case required(name) || conds[name] != "":
				startErrs = append(startErrs, errs[i])
			default:
				rt.notice("optional service %s failed: %v", name, errs[i])
				rt.serviceResult(sb.ID, name, false, errs[i].Error())
			}
		}
		if len(startErrs) > 0 {
			return &backend.Error{Code: 125, Err: errors.Join(startErrs...)}
		}
		if err := rt.waitServices(ctx, gate); err != nil {
			return err
		}
		for _, name := range wave {
			done[name] = true
		}
	}

	var gating []*serviceWatch
	for _, name := range started {
		if waited[name] {
			continue
		}
		w := watch(name)
		if required(name) {
			gating = append(gating, w)
			continue
		}
		go w.report(ctx)
	}
	return rt.waitServices(ctx, gating)
}

// serviceWatch follows one starting service until it is ready or failed.
type serviceWatch struct {
	sandbox  string
	rt       *Runtime
	name, id string
	primary  string // the sandbox's primary container
	probe    string // the healthcheck's argv, for messages
	job      bool   // others wait for it to complete: exit 0 is its success
	timeout  string // sandbox.ready_timeout, for messages
	deadline time.Time
}

// serviceState is what one inspection of a starting service says.
type serviceState int

const (
	servicePending serviceState = iota
	serviceReady
	serviceFailed
)

// check inspects the service once. A failure comes with its reason (without the
// log lines, which fail adds).
func (w *serviceWatch) check(ctx context.Context) (serviceState, string, error) {
	ci, err := w.rt.Engine.ContainerInspect(ctx, w.id)
	if err != nil {
		return servicePending, "", err
	}
	st := ci.State
	if st == nil {
		return servicePending, "", nil
	}
	if w.probe == "" && ci.Config != nil && ci.Config.Healthcheck != nil && len(ci.Config.Healthcheck.Test) > 1 {
		w.probe = strings.Join(ci.Config.Healthcheck.Test[1:], " ")
	}
	health := st.Health
	if health != nil && (health.Status == container.NoHealthcheck || health.Status == "" && !hasHealthcheck(ci.Config)) {
		// Podman 4.3's Docker-compatible API sends an empty Health for a container without
		// a healthcheck where Docker sends none.
		health = nil
	}
	switch {
	case w.job && st.Status == container.StateExited && st.ExitCode == 0 && !st.OOMKilled:
		return serviceReady, "", nil
	case w.job && (st.Status == container.StateExited || st.Status == container.StateDead):
		return serviceFailed, fmt.Sprintf("service %s did not complete successfully: it exited with code %d", w.name, st.ExitCode), nil
	case w.job:
		return servicePending, "", nil
	case st.Status == container.StateExited || st.Status == container.StateDead:
		how := fmt.Sprintf("exited with code %d", st.ExitCode)
		if st.OOMKilled {
			how = "was killed for lack of memory"
		}
		if health != nil {
			return serviceFailed, fmt.Sprintf("service %s %s before it was healthy", w.name, how), nil
		}
		return serviceFailed, fmt.Sprintf("service %s %s", w.name, how), nil
	case !st.Running:
		return servicePending, "", nil
	case health == nil:
		return serviceReady, "", nil
	}
	switch health.Status {
	case container.Healthy:
		return serviceReady, "", nil
	case container.Unhealthy:
		msg := fmt.Sprintf("service %s is unhealthy (healthcheck %s failed %d times", w.name, w.probe, st.Health.FailingStreak)
		if n := len(st.Health.Log); n > 0 && st.Health.Log[n-1] != nil {
			if out := strings.TrimSpace(st.Health.Log[n-1].Output); out != "" {
				msg += ": " + firstLine(out)
			}
		}
		return serviceFailed, msg + ")", nil
	}
	return servicePending, "", nil
}

// hasHealthcheck reports whether a container's config runs a healthcheck.
func hasHealthcheck(c *container.Config) bool {
	return c != nil && c.Healthcheck != nil && len(c.Healthcheck.Test) > 0 && c.Healthcheck.Test[0] != "NONE"
}

// timedOut is the reason given when the service is not ready by the deadline.
func (w *serviceWatch) timedOut() string {
	if w.job {
		return fmt.Sprintf("service %s has not completed after %s", w.name, w.timeout)
	}
	if w.probe != "" {
		return fmt.Sprintf("service %s is not healthy after %s (healthcheck %s)", w.name, w.timeout, w.probe)
	}
	return fmt.Sprintf("service %s is not running after %s", w.name, w.timeout)
}

// fail is the error of a failed required service: the reason and its last log lines.
func (w *serviceWatch) fail(ctx context.Context, reason string) error {
	logs := w.rt.serviceLogs(ctx, w.id)
	if logs == "" {
		return failed("%s; it logged nothing", reason)
	}
	return failed("%s; last log lines:\n%s", reason, logs)
}

// waitServices waits until every watched service is ready, and fails with the first
// that fails or is not ready by its deadline.
func (rt *Runtime) waitServices(ctx context.Context, watches []*serviceWatch) error {
	if len(watches) == 0 {
		return nil
	}
	tick := time.NewTicker(servicePollInterval)
	defer tick.Stop()
	pending := watches
	for {
		next := pending[:0]
		for _, w := range pending {
			state, reason, err := w.check(ctx)
			switch {
			case err != nil && ctx.Err() != nil:
				return ctx.Err()
			case err != nil && cerrdefs.IsNotFound(err):
				return failed("service %s is gone (its container %.12s was removed)", w.name, w.id)
			case err != nil:
				return failed("cannot inspect service %s: %v", w.name, err)
			case state == serviceFailed:
				err := w.fail(ctx, reason)
				rt.serviceResult(w.sandbox, w.name, false, err.Error())
				return err
			case state == servicePending && !time.Now().Before(w.deadline):
				err := w.fail(ctx, w.timedOut())
				rt.serviceResult(w.sandbox, w.name, false, err.Error())
				return err
			case state == servicePending:
				next = append(next, w)
			default:
				rt.serviceResult(w.sandbox, w.name, true, "")
			}
		}
		pending = next
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// report follows an optional service in the background and reports its first
// result as a notice. It ends with ctx, by the deadline at the latest, and quietly
// when the container disappears (the sandbox was removed meanwhile).
func (w *serviceWatch) report(ctx context.Context) {
	tick := time.NewTicker(servicePollInterval)
	defer tick.Stop()
	for {
		state, reason, err := w.check(ctx)
		switch {
		case err != nil && (ctx.Err() != nil || cerrdefs.IsNotFound(err)):
			return
		case err != nil:
			w.rt.notice("optional service %s: cannot inspect it: %v", w.name, err)
			return
		case state == serviceReady:
			w.rt.notice("optional service %s is ready", w.name)
			w.rt.serviceResult(w.sandbox, w.name, true, "")
			return
		case state == serviceFailed:
			if w.rt.primaryEnded(ctx, w.primary) {
				return // stopped with the sandbox, not a failure of its own
			}
			err := w.fail(ctx, reason)
			w.rt.notice("optional service %s failed: %v", w.name, err)
			w.rt.serviceResult(w.sandbox, w.name, false, err.Error())
			return
		case !time.Now().Before(w.deadline):
			if w.rt.primaryEnded(ctx, w.primary) {
				return
			}
			err := w.fail(ctx, w.timedOut())
			w.rt.notice("optional service %s failed: %v", w.name, err)
			w.rt.serviceResult(w.sandbox, w.name, false, err.Error())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// primaryEnded reports whether the sandbox's primary container has run and exited,
// or is gone: the sandbox is shutting down.
func (rt *Runtime) primaryEnded(ctx context.Context, id string) bool {
	if id == "" {
		return false
	}
	ci, err := rt.Engine.ContainerInspect(ctx, id)
	if err != nil {
		return cerrdefs.IsNotFound(err) || ctx.Err() != nil
	}
	return ci.State != nil && (ci.State.Status == container.StateExited || ci.State.Status == container.StateDead || ci.State.Status == container.StateRemoving)
}

// serviceLogs returns the last log lines of a service container, stdout and stderr
// interleaved, each indented.
func (rt *Runtime) serviceLogs(ctx context.Context, id string) string {
	rc, err := rt.Engine.ContainerLogs(ctx, id, container.LogsOptions{
		ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(serviceLogLines),
	})
	if err != nil {
		return "  (cannot read its logs: " + err.Error() + ")"
	}
	defer rc.Close()
	var buf bytes.Buffer
	// Service containers never have a TTY, so the stream is multiplexed.
	if _, err := stdcopy.StdCopy(&buf, &buf, rc); err != nil && buf.Len() == 0 {
		return "  (cannot read its logs: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) > serviceLogLines {
		lines = lines[len(lines)-serviceLogLines:]
	}
	var out []string
	for _, l := range lines {
		if l = strings.TrimRight(l, "\r"); l != "" || len(out) > 0 {
			out = append(out, "  "+l)
		}
	}
	return strings.Join(out, "\n")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// wrapService makes a service with substituted env values start through
// `airlock supervise wrap`, from the injected supervisor volume: it waits for the
// values on a socket on the service's tmpfs (deliverServiceSecrets hands them over
// through the Engine API), sets them, and execs the image's entrypoint and command. The container config keeps only names
// and key paths, so docker inspect never shows a value.
func (rt *Runtime) wrapService(ctx context.Context, sb *backend.Sandbox, name string, s manifest.Service, cfg *container.Config, host *container.HostConfig, secretEnv map[string]string) error {
	img, err := rt.Engine.ImageInspect(ctx, s.Image)
	if err != nil {
		return failed("cannot inspect the image of service %s: %v", name, err)
	}
	var argv []string
	switch {
	case len(s.Entrypoint) > 0:
		argv = append(argv, s.Entrypoint...)
	case img.Config != nil:
		argv = append(argv, img.Config.Entrypoint...)
	}
	switch {
	case len(s.Command) > 0:
		argv = append(argv, s.Command...)
	case len(s.Entrypoint) == 0 && img.Config != nil:
		argv = append(argv, img.Config.Cmd...)
	}
	if len(argv) == 0 {
		return configErr("%s: the image %s has no entrypoint or command; set command", manifest.KeyPath("services", name), s.Image)
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

// deliverServiceSecrets hands a wrapped service its values once it runs (its
// wrapper waits for them before the service's own command starts).
func (rt *Runtime) deliverServiceSecrets(ctx context.Context, sb *backend.Sandbox, name string) error {
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
	if err := backend.DeliverValues(ctx, rt, sb.Services[name], values); err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	return nil
}

// serviceResult reports a service's first result to OnService, if set.
func (rt *Runtime) serviceResult(sandboxID, service string, ready bool, detail string) {
	if rt.OnService != nil {
		rt.OnService(sandboxID, service, ready, detail)
	}
}
