package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"

	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/supervisor"
)

// Request asks for a new sandbox.
type Request struct {
	ID       string // "" for a new UUIDv4
	Manifest *manifest.Resolved
	Kind     string   // KindRun or KindUp
	Command  []string // the main command (run); nil for an up sandbox, whose main process idles
	Env      []string // K=V from -e, over [env]
	// EnvSecrets are -e NAME values from the caller's environment, over [env]
	// and Env: delivered like substituted values, never written in the spec.
	EnvSecrets map[string]string
	Workdir    string // -w, over sandbox.workdir
	TTY        bool   // allocate a terminal for the main command
	Stdin      bool   // keep stdin open for the main command
	Labels     map[string]string
	Quiet      bool // no shutdown lines from the supervisor
	// CLIPid and CLIStart identify the CLI process of a run sandbox, for the reaper.
	CLIPid   int
	CLIStart string
	// KeepFiles says the sandbox's files are read after its main command
	// exited (run --output, --keep): a backend whose stopped containers cannot
	// be read (Kubernetes) keeps them readable until the sandbox is removed.
	KeepFiles bool
	// ClientFiles says the project and the [copies] sources are on the
	// client's machine, not this one: the sandbox is made as on a remote Engine
	// (the project copied, host mounts refused, tools skipped) and nothing is
	// copied in; the client writes the project and copies through the files
	// API before the start.
	ClientFiles bool
	// ToolEnv is the caller's environment for the builtin tools' host paths,
	// over the runtime's own (Getenv): GOCACHE=/tmp/x on the command line
	// of a run counts although the daemon was started before.
	ToolEnv map[string]string
	// EndMarker, for a run, is the nonce of the marker the supervisor writes
	// after the main command's output (supervisor.Spec.EndMarker): a reader of
	// the output has the code then, while slow daemons still shut down.
	EndMarker string
	// Park makes the sandbox for a warm pool: started in advance, its
	// supervisor starts what takes no run-time value and waits for a Claim
	// (Command, Env, Workdir, TTY and Stdin are the claim's, not the
	// request's). PoolKey is its pool's key (LabelPool).
	Park    bool
	PoolKey string
}

// Sandbox is a created sandbox.
type Sandbox struct {
	ID        string
	Name      string
	Project   string
	Kind      string
	PlanHash  string
	Network   string // "" when the sandbox has no network of its own
	PrimaryID string
	Services  map[string]string // service name → container ID
	TTY       bool
	// Ports are the published ports as the Engine bound them at the last Start.
	Ports []Port

	manifest         *manifest.Resolved
	supervisorVolume string
	fresh            bool // created by this runtime and never started: its status stream is empty
	envSecrets       map[string]string
	shard            string // the shard of the Engine's shared airlock network it is on, when not on one of its own
	egressID         string // the egress proxy container, when the sandbox has egress rules
	egressDNS        string // the proxy's address on the sandbox network, its containers' DNS server
	parked           bool   // made for a warm pool: its values come with its claim (Claim), not at Start
	hold             bool   // its supervisor holds until Start released it (LabelHold)

	// A parked sandbox's claim goes to its supervisor's stdin through the
	// attach to its main command (Attach keeps it), whose stdin, when the
	// client forwards one, follows the claim (Claim).
	claimMu    sync.Mutex
	claimConn  *types.HijackedResponse
	claimStdin io.Reader
}

// maxInlineSpec is the largest spec passed on the supervisor's command line (Linux
// takes up to 128 KiB per argument).
const maxInlineSpec = 64 << 10

// PlanHash identifies what a manifest asks for, without revealing any substituted
// value: substituted env values (delivered at each start) and vault values are
// masked before hashing (manifest.PlanView).
func PlanHash(r *manifest.Resolved, imageID string) string {
	b, _ := json.Marshal(struct {
		M       manifest.Manifest
		Dir     string
		ImageID string
	}{r.PlanView(), r.ProjectDir, imageID})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:16]
}

// Create makes every object of a sandbox (network, service containers, primary
// container with its copies) without starting anything. On failure it removes what
// it made. Host-side problems (a missing mount source) are found before any object exists.
func (rt *Runtime) Create(ctx context.Context, req *Request) (sb *Sandbox, err error) {
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

	sb = &Sandbox{
		ID: req.ID, Name: objectName(req.ID), Project: r.ProjectDir, Kind: req.Kind,
		PlanHash: PlanHash(r, img.ID), Services: map[string]string{},
		TTY: req.TTY, manifest: r, supervisorVolume: vol, fresh: true, envSecrets: req.EnvSecrets, parked: req.Park,
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
	labels[LabelSandbox] = sb.ID
	labels[LabelProject] = sb.Project
	rt.ownLabel(labels)
	labels[LabelPlanHash] = sb.PlanHash
	labels[LabelKind] = req.Kind
	if req.Park {
		labels[LabelPool] = req.PoolKey
	}
	done = rt.step(req.ID, "network")
	switch {
	case r.Sandbox.Egress != nil:
		// No route out but through the egress proxy.
		if err := rt.egressSupported(ctx); err != nil {
			return sb, err
		}
		nl := copyLabels(labels, LabelRole, "network")
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

	spec := buildSpec(req, r, hp)
	spec.Forwards = serviceForwards(r)
	spec.Park, spec.ClaimStdin = req.Park, req.Park
	if sb.Network != "" && len(sharedServices(r)) > 0 {
		// The services that share the sandbox's network namespace join the
		// primary's, so they start after it: the supervisor holds until
		// they are ready (Start releases it).
		spec.Hold, spec.HoldTimeout, sb.hold = true, holdSeconds(r), true
	}
	stateOwner := u
	if rootPID1 {
		MainUser(spec, userSpec)
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
	if sb.shard != "" {
		cfg.Labels[LabelShard] = sb.shard
	}
	if sb.hold {
		cfg.Labels[LabelHold] = "1"
	}
	if rootPID1 {
		// The container runs as root; the files API still writes as the
		// sandbox user, which the label names (WriteArchive).
		cfg.User = rootUser
		cfg.Labels[LabelUser] = userSpec
	}
	if inline {
		cfg.Entrypoint = []string{SupervisorIn, "supervise", supervisor.SpecFlag, string(specJSON)}
	}
	done = rt.step(req.ID, "create")
	c, err := rt.Engine.ContainerCreate(ctx, cfg, host, netcfg, nil, sb.Name)
	if err != nil && sb.shard != "" && cerrdefs.IsNotFound(err) {
		// The shared network was removed behind airlock's back (or it was a
		// duplicate, removed by another process): find or make it again.
		if id, nerr := rt.sharedNetwork(ctx, sb.shard, true); nerr == nil {
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

// workdir is -w, else sandbox.workdir, else the project dir.
func workdir(req *Request, r *manifest.Resolved) string {
	switch {
	case req.Workdir != "":
		return req.Workdir
	case r.Sandbox.Workdir != "":
		return r.Sandbox.Workdir
	}
	return r.ProjectDir
}

// hardenAll reports whether the whole container may get no-new-privileges: only when
// the main process and every daemon are hardened (design.md §6).
func hardenAll(r *manifest.Resolved) bool {
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

func (rt *Runtime) primaryConfig(sb *Sandbox, req *Request, r *manifest.Resolved, hp *hostPlan, u sandboxUser, imageRef, vol string, labels map[string]string) (*container.Config, *container.HostConfig, *network.NetworkingConfig, error) {
	daemons := strconv.Itoa(len(r.Daemons))
	cfg := &container.Config{
		Image:      imageRef,
		Entrypoint: []string{SupervisorIn, "supervise", "--spec", SpecIn},
		Cmd:        []string{},
		User:       u.Spec,
		WorkingDir: workdir(req, r),
		Tty:        req.TTY,
		OpenStdin:  req.Stdin || req.TTY || req.Park, // a claim may attach stdin
		StdinOnce:  req.Stdin || req.TTY || req.Park,
		Labels:     copyLabels(labels, LabelRole, "primary", LabelDaemons, daemons),
		Hostname:   hostname(sb.ID),
	}
	cfg.Labels[LabelStopTimeout] = strconv.Itoa(stopSeconds(r))
	if req.CLIPid > 0 {
		cfg.Labels[LabelCLIPid] = strconv.Itoa(req.CLIPid)
		cfg.Labels[LabelCLIStart] = req.CLIStart
	}
	host := &container.HostConfig{
		Privileged: r.Sandbox.Privileged,
		Tmpfs:      map[string]string{RunMount: "mode=1777,size=16m"},
		Mounts: []mount.Mount{
			{Type: mount.TypeVolume, Source: vol, Target: BinMount, ReadOnly: true},
		},
	}
	if ProjectMode(r, rt.Remote || req.ClientFiles) == "bind" {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: r.ProjectDir, Target: r.ProjectDir})
	}
	for _, b := range hp.Binds {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: b.Source, Target: inHome(b.Target, u.Home), ReadOnly: b.ReadOnly})
	}
	for _, h := range r.Parsed.Sandbox.ExtraHosts {
		host.ExtraHosts = append(host.ExtraHosts, h.String())
	}
	if hardenAll(r) {
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

// stopSeconds is how long `stop` waits for the supervisor: the longest daemon
// timeout plus a margin (an hour when a daemon waits forever). A timeout is
// bounded as validation bounds it (a year), so that the Engine's stop timeout
// (seconds, made a time.Duration) cannot wrap around, even for a manifest that
// was not validated (a record written by an older daemon).
func stopSeconds(r *manifest.Resolved) int {
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

// hostname is the sandbox's host name: a DNS label made from its ID.
func hostname(id string) string {
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

// buildSpec turns the manifest into the supervisor's spec. Substituted values are
// not written: the spec refers to them by key path, and they reach the supervisor
// through the Engine API (see DeliverValues).
func buildSpec(req *Request, r *manifest.Resolved, hp *hostPlan) *supervisor.Spec {
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
			Cwd:    workdir(req, r),
			Harden: &harden,
		},
	}
	spec.PathPrepend = slices.Concat(r.Sandbox.PathPrepend, hp.Path)
	spec.Main.Env = withProxyEnv(r, envEntries([]string{"env"}, r.Env, r.Sources))
	for _, kv := range hp.Env {
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

// PlanHashFor returns the plan hash a sandbox made from r now would carry (the
// image is built or pulled when missing).
func (rt *Runtime) PlanHashFor(ctx context.Context, r *manifest.Resolved) (string, error) {
	_, img, err := rt.image(ctx, r)
	if err != nil {
		return "", err
	}
	return PlanHash(r, img.ID), nil
}

// Prepare does the host-side and image work of a future Create where its output can
// be seen: mount sources are checked (a missing one with missing = "fail" is a config
// error), warnings printed (a writable mount the sandbox user cannot write among
// them), and the images pulled with progress or built. Its output
// and credentials are o's, not the runtime's: calls may run at once.
func (rt *Runtime) Prepare(ctx context.Context, r *manifest.Resolved, o PrepareOptions) error {
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
