package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
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
// Its steps, in order: the host plan (with the checks that need no object), the
// image, the supervisor volume, the sandbox user, then the objects: network,
// primary, services, copies.
func (rt *Runtime) Create(ctx context.Context, req *backend.Request) (sb *backend.Sandbox, err error) {
	c := &creation{rt: rt, req: req, r: req.Manifest}
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := c.hostPlan(ctx); err != nil {
		return nil, err
	}
	if err := c.image(ctx); err != nil {
		return nil, err
	}
	if err := c.supervisorVolume(ctx); err != nil {
		return nil, err
	}
	if err := c.user(ctx); err != nil {
		return nil, err
	}
	sb = c.handle()
	defer func() {
		if err != nil {
			if rmErr := rt.Remove(context.WithoutCancel(ctx), sb.ID); rmErr != nil {
				err = fmt.Errorf("%w (and cleaning up: %v)", err, rmErr)
			}
		}
	}()
	reserved, err := c.network(ctx)
	if err != nil {
		return sb, err
	}
	if reserved != nil {
		defer reserved() // a shard counts it on the Engine once its container exists
	}
	if err := c.primary(ctx); err != nil {
		return sb, err
	}
	if err := rt.services().create(ctx, sb, c.r, c.labels, c.hp.ServiceBinds); err != nil {
		return sb, err
	}
	done := rt.step(req.ID, "copy-in")
	defer done()
	if err := c.copies(ctx); err != nil {
		return sb, err
	}
	if err := ctx.Err(); err != nil {
		// Cancelled (the sandbox deleted meanwhile): what was made goes.
		return sb, fmt.Errorf("cannot make sandbox %s: %w", sb.ID, err)
	}
	return sb, nil
}

// creation is one Create: its request, and what each step found or made.
type creation struct {
	rt  *Runtime
	req *backend.Request
	r   *manifest.Resolved

	hp       *hostPlan             // host plan
	imageRef string                // image
	img      image.InspectResponse //
	vol      string                // supervisor volume
	userSpec string                // sandbox user: as asked, else the image's
	u        sandboxUser           //
	rootPID1 bool                  // PID 1 runs as root (accounts.go)

	sb     *backend.Sandbox  // handle
	labels map[string]string // the labels of its objects

	primaryID  string      // primary
	specJSON   []byte      //
	inline     bool        // the spec rides on the supervisor's command line
	stateOwner sandboxUser // who owns the state folder
}

// check checks the request before anything is looked at: its ID (made when
// empty), and that services come with a bridge network.
func (c *creation) check() error {
	req, r := c.req, c.r
	if req.ID == "" {
		req.ID = ids.New()
	} else if err := ids.Validate(req.ID); err != nil {
		return configErr("%v", err)
	}
	if len(r.Services) > 0 && r.Sandbox.Network != "bridge" {
		return configErr("services need sandbox.network = \"bridge\", not %q", r.Sandbox.Network)
	}
	return nil
}

// hostPlan plans the host's side (mounts, tools; its warnings printed), then
// checks that no sandbox of that ID exists and that the Engine applies the
// limits asked for.
func (c *creation) hostPlan(ctx context.Context) error {
	rt, req, r := c.rt, c.req, c.r
	done := rt.step(req.ID, "host plan")
	hp, err := rt.planner().plan(ctx, r, rt.Remote || req.ClientFiles, req.ToolEnv)
	done()
	if err != nil {
		return err
	}
	c.hp = hp
	for _, w := range hp.Warnings {
		rt.notice("warning: %s", w)
	}
	if existing, _ := rt.Engine.ContainerInspect(ctx, objectName(req.ID)); existing.ContainerJSONBase != nil {
		return configErr("sandbox %s already exists", req.ID)
	}
	return rt.kind().limitsSupported(ctx, r)
}

// image makes the sandbox image available (built or pulled), then the
// services' images.
func (c *creation) image(ctx context.Context) error {
	rt, req, r := c.rt, c.req, c.r
	w := rt.images(nil)
	done := rt.step(req.ID, "image")
	imageRef, img, err := w.Sandbox(ctx, r)
	done()
	if err != nil {
		return err
	}
	c.imageRef, c.img = imageRef, img
	for name, s := range r.Services {
		if _, err := w.Ensure(ctx, s.Image); err != nil {
			return fmt.Errorf("services.%s: %w", name, err)
		}
	}
	return nil
}

// supervisorVolume finds the supervisor volume, filled when needed.
func (c *creation) supervisorVolume(ctx context.Context) error {
	done := c.rt.step(c.req.ID, "supervisor volume")
	vol, err := c.rt.supervisors().volume(ctx, c.imageRef)
	done()
	c.vol = vol
	return err
}

// user resolves the sandbox user (sandbox.user, else the image's USER), gives
// it its own tool caches where it cannot write the host's, and decides whether
// PID 1 runs as root.
func (c *creation) user(ctx context.Context) error {
	rt, r, hp := c.rt, c.r, c.hp
	users := rt.accounts()
	c.userSpec = r.Sandbox.User
	if c.userSpec == "" && c.img.Config != nil {
		c.userSpec = c.img.Config.User
	}
	needAccounts := len(r.Copies) > 0 || hasHomeTarget(hp.Binds)
	u, err := users.resolve(ctx, c.imageRef, c.userSpec, needAccounts)
	if err != nil {
		return err
	}
	c.u = u
	// The sandbox user's own tool caches where it cannot write the host's.
	for _, w := range rt.planner().fitCaches(hp, u) {
		rt.notice("warning: %s", w)
	}
	// PID 1 runs as the sandbox user unless a daemon needs another user
	// beside a sandbox user that is not root: then as root (accounts.go).
	beside, err := users.beside(ctx, c.imageRef, r, c.userSpec, u)
	if err != nil {
		return err
	}
	c.rootPID1 = len(beside) > 0
	return nil
}

// handle makes the sandbox's handle and the labels of its objects.
func (c *creation) handle() *backend.Sandbox {
	req, r := c.req, c.r
	sb := &backend.Sandbox{
		ID: req.ID, Name: objectName(req.ID), Project: r.ProjectDir, Kind: req.Kind,
		PlanHash: backend.PlanHash(r, c.img.ID), Services: map[string]string{},
		TTY: req.TTY, Own: &sandboxState{manifest: r, supervisorVolume: c.vol, fresh: true, envSecrets: req.EnvSecrets, parked: req.Park},
	}
	labels := map[string]string{}
	for k, v := range req.Labels {
		labels[k] = v
	}
	labels[backend.LabelSandbox] = sb.ID
	labels[backend.LabelProject] = sb.Project
	ownerKey(c.rt.Owner).label(labels)
	labels[backend.LabelPlanHash] = sb.PlanHash
	labels[backend.LabelKind] = req.Kind
	if req.Park {
		labels[backend.LabelPool] = req.PoolKey
	}
	c.sb, c.labels = sb, labels
	return sb
}

// network puts the sandbox on its network: an internal one claimed from the
// daemon's egress proxy (egress rules), or its bridge network (bridgeNetwork),
// whose reservation reserved ends (nil for none).
func (c *creation) network(ctx context.Context) (reserved func(), err error) {
	rt, sb, r := c.rt, c.sb, c.r
	done := rt.step(c.req.ID, "network")
	switch {
	case r.Sandbox.Egress != nil:
		// No route out but through the egress proxy.
		if err := rt.kind().egressSupported(ctx); err != nil {
			return nil, err
		}
		// An internal network of the daemon's, parked with the shared proxy
		// on it (egresspark.go).
		if err := (egressProxy{rt: rt}).create(ctx, sb, r); err != nil {
			return nil, err
		}
	case r.Sandbox.Network == "bridge":
		reserved, err = bridgeNetwork(ctx, rt.kind(), rt.shards(), sb, r, c.labels)
		if err != nil {
			return nil, err
		}
	}
	done()
	return reserved, nil
}

// primary creates the primary container, the supervisor's spec on its
// command line when it fits and PID 1 can make its state folder (else
// uploaded with the copies).
func (c *creation) primary(ctx context.Context) error {
	rt, req, r, sb := c.rt, c.req, c.r, c.sb
	spec := backend.SpecWithTools(req, r, c.hp.Path, c.hp.Env)
	spec.Forwards = serviceForwards(r)
	spec.Park, spec.ClaimStdin = req.Park, req.Park
	if sb.Network != "" && len(sharedServices(r)) > 0 {
		// The services that share the sandbox's network namespace join the
		// primary's, so they start after it: the supervisor holds until
		// they are ready (Start releases it).
		spec.Hold, spec.HoldTimeout, ownState(sb).hold = true, holdSeconds(r), true
	}
	c.stateOwner = c.u
	if c.rootPID1 {
		backend.MainUser(spec, c.userSpec)
		c.stateOwner = sandboxUser{Spec: rootUser, Home: "/root"}
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return failed("cannot encode the supervisor spec: %v", err)
	}
	c.specJSON = specJSON
	// The spec holds no secret: it rides on the supervisor's command line, and
	// the supervisor makes its state folder itself, unless the container's
	// user could not (not root) or the spec is large; then both are uploaded.
	c.inline = c.stateOwner.UID == 0 && len(specJSON) <= maxInlineSpec
	cfg, host, netcfg, err := primaryConfig(rt.Remote, sb, req, r, c.hp, c.u, c.imageRef, c.vol, c.labels)
	if err != nil {
		return err
	}
	if ownState(sb).shard != "" {
		cfg.Labels[LabelShard] = ownState(sb).shard
	}
	if ownState(sb).hold {
		cfg.Labels[LabelHold] = "1"
	}
	if c.rootPID1 {
		// The container runs as root; the files API still writes as the
		// sandbox user, which the label names (WriteArchive).
		cfg.User = rootUser
		cfg.Labels[backend.LabelUser] = c.userSpec
	}
	if c.inline {
		cfg.Entrypoint = []string{backend.SupervisorIn, "supervise", supervisor.SpecFlag, string(specJSON)}
	}
	done := rt.step(req.ID, "create")
	// Not cancelled half-way: an Engine finishes a create whose client went
	// away (Engine 29 did, after the failure's clean-up had looked), so the
	// clean-up must see what the call made.
	made, err := rt.Engine.ContainerCreate(context.WithoutCancel(ctx), cfg, host, netcfg, nil, sb.Name)
	if err != nil && ownState(sb).shard != "" && cerrdefs.IsNotFound(err) {
		// The shared network was removed behind airlock's back (or it was a
		// duplicate, removed by another process): find or make it again.
		if id, nerr := rt.shards().Network(ctx, ownState(sb).shard, true); nerr == nil {
			sb.Network = id
			host.NetworkMode = container.NetworkMode(id)
			netcfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{id: {}}}
			made, err = rt.Engine.ContainerCreate(context.WithoutCancel(ctx), cfg, host, netcfg, nil, sb.Name)
		}
	}
	done()
	if err != nil {
		return failed("cannot create the sandbox container: %v", err)
	}
	sb.PrimaryID, c.primaryID = made.ID, made.ID
	return nil
}

// copies gives the created primary what it needs before it starts: the
// account of a numeric sandbox user, the spec and state folder when not
// inline, the project when copied and the [copies] entries (unless the
// client writes them: files API).
func (c *creation) copies(ctx context.Context) error {
	rt, r, id := c.rt, c.r, c.primaryID
	cp := copier{engine: rt.Engine, getenv: rt.Getenv}
	if c.u.UID != 0 && numericUser(c.userSpec) {
		added, err := rt.accounts().provide(ctx, id, c.u)
		if err != nil {
			return err
		}
		if added != nil {
			c.u.Home = added.Home
		}
	}
	if !c.inline {
		if err := cp.uploadState(ctx, id, c.specJSON, c.stateOwner); err != nil {
			return err
		}
	}
	if c.req.ClientFiles || c.req.FromSnapshot {
		return nil // the client writes them (files API), or the snapshot has them
	}
	if rt.ProjectCopied(r) {
		if err := cp.copyProject(ctx, id, r.ProjectDir, c.u); err != nil {
			return err
		}
	}
	return cp.copyIn(ctx, id, r, c.u)
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

// primaryConfig is the configuration of a sandbox's primary container;
// remote says the Engine cannot see this host's files.
func primaryConfig(remote bool, sb *backend.Sandbox, req *backend.Request, r *manifest.Resolved, hp *hostPlan, u sandboxUser, imageRef, vol string, labels map[string]string) (*container.Config, *container.HostConfig, *network.NetworkingConfig, error) {
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
	if projectfs.Mode(r, remote || req.ClientFiles) == "bind" {
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
