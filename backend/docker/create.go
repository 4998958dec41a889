package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/supervisor"
)

// maxInlineSpec is the largest spec passed on the supervisor's command line (Linux
// takes up to 128 KiB per argument).
const maxInlineSpec = 64 << 10

// Create makes every object of a sandbox (network, service containers, primary
// container with its copies) without starting anything. On failure it removes what
// it made. Host-side problems (a missing mount source) are found before any object exists.
func (rt *Runtime) Create(ctx context.Context, req *backend.Request) (sb *backend.Sandbox, err error) {
	r := req.Manifest
	if req.ID == "" {
		req.ID = ids.New()
	} else if err := ids.Validate(req.ID); err != nil {
		return nil, configErr("%v", err)
	}
	if len(r.Services) > 0 && r.Sandbox.Network != "bridge" {
		return nil, configErr("services need sandbox.network = \"bridge\", not %q", r.Sandbox.Network)
	}
	done := rt.step(req.ID, "host plan")
	hp, err := rt.planHost(ctx, r, rt.Remote || req.ClientFiles, req.ToolEnv)
	done()
	if err != nil {
		return nil, err
	}
	for _, w := range hp.Warnings {
		rt.notice("warning: %s", w)
	}
	if existing, _ := rt.Engine.ContainerInspect(ctx, objectName(req.ID)); existing.ContainerJSONBase != nil {
		return nil, configErr("sandbox %s already exists", req.ID)
	}
	if err := rt.limitsSupported(ctx, r); err != nil {
		return nil, err
	}
	done = rt.step(req.ID, "image")
	imageRef, img, err := rt.image(ctx, r)
	done()
	if err != nil {
		return nil, err
	}
	for name, s := range r.Services {
		if _, err := rt.ensureImage(ctx, s.Image); err != nil {
			return nil, fmt.Errorf("services.%s: %w", name, err)
		}
	}
	done = rt.step(req.ID, "supervisor volume")
	vol, err := rt.supervisorVolume(ctx, imageRef)
	done()
	if err != nil {
		return nil, err
	}
	userSpec := r.Sandbox.User
	if userSpec == "" && img.Config != nil {
		userSpec = img.Config.User
	}
	needAccounts := len(r.Copies) > 0 || hasHomeTarget(hp.Binds)
	u, err := rt.resolveUser(ctx, imageRef, userSpec, needAccounts)
	if err != nil {
		return nil, err
	}
	// The sandbox user's own tool caches where it cannot write the host's.
	for _, w := range rt.fitCaches(hp, u) {
		rt.notice("warning: %s", w)
	}
	// PID 1 runs as the sandbox user unless a daemon needs another user
	// beside a sandbox user that is not root: then as root (accounts.go).
	beside, err := rt.usersBeside(ctx, imageRef, r, userSpec, u)
	if err != nil {
		return nil, err
	}
	rootPID1 := len(beside) > 0

	sb = &backend.Sandbox{
		ID: req.ID, Name: objectName(req.ID), Project: r.ProjectDir, Kind: req.Kind,
		PlanHash: backend.PlanHash(r, img.ID), Services: map[string]string{},
		TTY: req.TTY, Own: &sandboxState{manifest: r, supervisorVolume: vol, fresh: true, envSecrets: req.EnvSecrets, parked: req.Park},
	}
	defer func() {
		if err != nil {
			if rmErr := rt.Remove(context.WithoutCancel(ctx), sb.ID); rmErr != nil {
				err = fmt.Errorf("%w (and cleaning up: %v)", err, rmErr)
			}
		}
	}()
	labels := map[string]string{}
	for k, v := range req.Labels {
		labels[k] = v
	}
	labels[backend.LabelSandbox] = sb.ID
	labels[backend.LabelProject] = sb.Project
	rt.ownLabel(labels)
	labels[backend.LabelPlanHash] = sb.PlanHash
	labels[backend.LabelKind] = req.Kind
	if req.Park {
		labels[backend.LabelPool] = req.PoolKey
	}
	done = rt.step(req.ID, "network")
	switch {
	case r.Sandbox.Egress != nil:
		// No route out but through the egress proxy.
		if err := rt.egressSupported(ctx); err != nil {
			return sb, err
		}
		nl := copyLabels(labels, backend.LabelRole, "network")
		if _, err := rt.Engine.NetworkCreate(ctx, sb.Name, network.CreateOptions{Driver: "bridge", Internal: true, Options: egressNetworkOptions, Labels: nl}); err != nil {
			return sb, failed("cannot create network %s: %v", sb.Name, err)
		}
		sb.Network = sb.Name
		if err := rt.createEgress(ctx, sb, r, imageRef, labels); err != nil {
			return sb, err
		}
	case r.Sandbox.Network == "bridge":
		reserved, err := rt.bridgeNetwork(ctx, sb, r, labels)
		if err != nil {
			return sb, err
		}
		defer reserved() // a shard counts it on the Engine once its container exists
	}
	done()

	spec := backend.SpecWithTools(req, r, hp.Path, hp.Env)
	spec.Forwards = serviceForwards(r)
	spec.Park, spec.ClaimStdin = req.Park, req.Park
	if sb.Network != "" && len(sharedServices(r)) > 0 {
		// The services that share the sandbox's network namespace join the
		// primary's, so they start after it: the supervisor holds until
		// they are ready (Start releases it).
		spec.Hold, spec.HoldTimeout, ownState(sb).hold = true, holdSeconds(r), true
	}
	stateOwner := u
	if rootPID1 {
		backend.MainUser(spec, userSpec)
		stateOwner = sandboxUser{Spec: rootUser, Home: "/root"}
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return sb, failed("cannot encode the supervisor spec: %v", err)
	}
	// The spec holds no secret: it rides on the supervisor's command line, and
	// the supervisor makes its state folder itself, unless the container's
	// user could not (not root) or the spec is large; then both are uploaded.
	inline := stateOwner.UID == 0 && len(specJSON) <= maxInlineSpec
	cfg, host, netcfg, err := rt.primaryConfig(sb, req, r, hp, u, imageRef, vol, labels)
	if err != nil {
		return sb, err
	}
	if ownState(sb).shard != "" {
		cfg.Labels[LabelShard] = ownState(sb).shard
	}
	if ownState(sb).hold {
		cfg.Labels[LabelHold] = "1"
	}
	if rootPID1 {
		// The container runs as root; the files API still writes as the
		// sandbox user, which the label names (WriteArchive).
		cfg.User = rootUser
		cfg.Labels[backend.LabelUser] = userSpec
	}
	if inline {
		cfg.Entrypoint = []string{backend.SupervisorIn, "supervise", supervisor.SpecFlag, string(specJSON)}
	}
	done = rt.step(req.ID, "create")
	c, err := rt.Engine.ContainerCreate(ctx, cfg, host, netcfg, nil, sb.Name)
	if err != nil && ownState(sb).shard != "" && cerrdefs.IsNotFound(err) {
		// The shared network was removed behind airlock's back (or it was a
		// duplicate, removed by another process): find or make it again.
		if id, nerr := rt.sharedNetwork(ctx, ownState(sb).shard, true); nerr == nil {
			sb.Network = id
			host.NetworkMode = container.NetworkMode(id)
			netcfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{id: {}}}
			c, err = rt.Engine.ContainerCreate(ctx, cfg, host, netcfg, nil, sb.Name)
		}
	}
	done()
	if err != nil {
		return sb, failed("cannot create the sandbox container: %v", err)
	}
	sb.PrimaryID = c.ID
	if err := rt.createServices(ctx, sb, r, labels, hp.ServiceBinds); err != nil {
		return sb, err
	}
	done = rt.step(req.ID, "copy-in")
	defer done()
	if u.UID != 0 && numericUser(userSpec) {
		added, err := rt.provideAccount(ctx, c.ID, u)
		if err != nil {
			return sb, err
		}
		if added != nil {
			u.Home = added.Home
		}
	}
	if !inline {
		if err := rt.uploadState(ctx, c.ID, specJSON, stateOwner); err != nil {
			return sb, err
		}
	}
	if req.ClientFiles {
		return sb, nil // the client writes them (files API)
	}
	if rt.projectMode(r) == "copy" {
		if err := rt.copyProject(ctx, c.ID, r.ProjectDir, u); err != nil {
			return sb, err
		}
	}
	if err := rt.copyIn(ctx, c.ID, r, u); err != nil {
		return sb, err
	}
	return sb, nil
}

// image returns the sandbox image: built from [sandbox.build], or sandbox.image
// (pulled when missing).
func (rt *Runtime) image(ctx context.Context, r *manifest.Resolved) (string, imageInspect, error) {
	return rt.ownWork().image(ctx, r)
}

func (w *imageWork) image(ctx context.Context, r *manifest.Resolved) (string, imageInspect, error) {
	rt := w.rt
	if r.Sandbox.Build != nil {
		ref, err := w.build(ctx, r)
		if err != nil {
			return "", imageInspect{}, err
		}
		img, err := rt.Engine.ImageInspect(ctx, ref)
		if err != nil {
			return "", imageInspect{}, failed("cannot inspect the built image %s: %v", ref, err)
		}
		return ref, img, nil
	}
	img, err := w.ensureImage(ctx, r.Sandbox.Image)
	return r.Sandbox.Image, img, err
}

func hasHomeTarget(binds []bind) bool {
	for _, b := range binds {
		if strings.HasPrefix(b.Target, "~") {
			return true
		}
	}
	return false
}

func copyLabels(labels map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(labels)+len(kv)/2)
	for k, v := range labels {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func (rt *Runtime) primaryConfig(sb *backend.Sandbox, req *backend.Request, r *manifest.Resolved, hp *hostPlan, u sandboxUser, imageRef, vol string, labels map[string]string) (*container.Config, *container.HostConfig, *network.NetworkingConfig, error) {
	daemons := strconv.Itoa(len(r.Daemons))
	cfg := &container.Config{
		Image:      imageRef,
		Entrypoint: []string{backend.SupervisorIn, "supervise", "--spec", backend.SpecIn},
		Cmd:        []string{},
		User:       u.Spec,
		WorkingDir: backend.Workdir(req, r),
		Tty:        req.TTY,
		OpenStdin:  req.Stdin || req.TTY || req.Park, // a claim may attach stdin
		StdinOnce:  req.Stdin || req.TTY || req.Park,
		Labels:     copyLabels(labels, backend.LabelRole, "primary", backend.LabelDaemons, daemons),
		Hostname:   backend.Hostname(sb.ID),
	}
	cfg.Labels[backend.LabelStopTimeout] = strconv.Itoa(backend.StopSeconds(r))
	if req.CLIPid > 0 {
		cfg.Labels[backend.LabelCLIPid] = strconv.Itoa(req.CLIPid)
		cfg.Labels[backend.LabelCLIStart] = req.CLIStart
	}
	host := &container.HostConfig{
		Privileged: r.Sandbox.Privileged,
		Tmpfs:      map[string]string{backend.RunMount: "mode=1777,size=16m"},
		Mounts: []mount.Mount{
			{Type: mount.TypeVolume, Source: vol, Target: backend.BinMount, ReadOnly: true},
		},
	}
	if projectfs.Mode(r, rt.Remote || req.ClientFiles) == "bind" {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: r.ProjectDir, Target: r.ProjectDir})
	}
	for _, b := range hp.Binds {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: b.Source, Target: projectfs.InHome(b.Target, u.Home), ReadOnly: b.ReadOnly})
	}
	for _, h := range r.Parsed.Sandbox.ExtraHosts {
		host.ExtraHosts = append(host.ExtraHosts, h.String())
	}
	if backend.HardenAll(r) {
		host.SecurityOpt = []string{"no-new-privileges"}
	}
	capAdd, capDrop, err := capabilities(r)
	if err != nil {
		return nil, nil, nil, err
	}
	host.CapAdd, host.CapDrop = capAdd, egressCapDrop(r, capAdd, capDrop)
	cfg.ExposedPorts, host.PortBindings = r.Parsed.Sandbox.EnginePorts()
	if r.Sandbox.CPUs > 0 {
		host.NanoCPUs = int64(r.Sandbox.CPUs * 1e9)
	}
	host.Memory = r.Parsed.Sandbox.Memory
	var netcfg *network.NetworkingConfig
	switch r.Sandbox.Network {
	case "bridge":
		host.NetworkMode = container.NetworkMode(sb.Network)
		host.DNS = egressDNS(sb)
		// The services in its network namespace answer to their names at
		// its address.
		netcfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{sb.Network: {Aliases: sharedAliases(r)}}}
	default:
		host.NetworkMode = container.NetworkMode(r.Sandbox.Network)
	}
	return cfg, host, netcfg, nil
}

// PlanHashFor returns the plan hash a sandbox made from r now would carry (the
// image is built or pulled when missing).
func (rt *Runtime) PlanHashFor(ctx context.Context, r *manifest.Resolved) (string, error) {
	_, img, err := rt.image(ctx, r)
	if err != nil {
		return "", err
	}
	return backend.PlanHash(r, img.ID), nil
}

// Prepare does the host-side and image work of a future Create where its output can
// be seen: mount sources are checked (a missing one with missing = "fail" is a config
// error), warnings printed (a writable mount the sandbox user cannot write among
// them), and the images pulled with progress or built. Its output
// and credentials are o's, not the runtime's: calls may run at once.
func (rt *Runtime) Prepare(ctx context.Context, r *manifest.Resolved, o backend.PrepareOptions) error {
	w := &imageWork{rt: rt, o: o}
	hp, err := rt.planHost(ctx, r, rt.Remote || o.ClientFiles, o.ToolEnv)
	if err != nil {
		return err
	}
	for _, warning := range hp.Warnings {
		w.notice("warning: %s", warning)
	}
	imageRef, img, err := w.image(ctx, r)
	if err != nil {
		return err
	}
	for _, warning := range rt.writableWarnings(ctx, r, hp, imageRef, img) {
		w.notice("warning: %s", warning)
	}
	for name, s := range r.Services {
		if _, err := w.ensureImage(ctx, s.Image); err != nil {
			return fmt.Errorf("services.%s: %w", name, err)
		}
	}
	return nil
}
