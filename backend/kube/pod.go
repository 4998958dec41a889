package kube

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/supervisor"
)

// Volumes of a sandbox's Pod.
const (
	// binVolume holds the supervisor binary: the install container writes it,
	// the main container runs it from backend.BinMount (read-only).
	binVolume = "airlock-bin"
	// runVolume is the main container's tmpfs at backend.RunMount (secrets
	// socket, exec environment), as Docker's --tmpfs.
	runVolume = "airlock-run"
	// stateVolume is the supervisor's state dir (supervisor.StateDir). An
	// emptyDir is world-writable, so a PID 1 that is not root can make its
	// status stream and logs there (on Docker the runtime uploads the folder
	// owned by the sandbox user instead).
	stateVolume = "airlock-state"
	// keeperStateDir is where the keeper sees stateVolume (its image's
	// /airlock is the binary, so not supervisor.StateDir).
	keeperStateDir = "/airlock-state"
	// runVolumePrefix starts the tmpfs of each wrapped service (its own
	// secrets socket at backend.RunMount).
	runVolumePrefix = "airlock-run-"
	// installMount is where the install container sees binVolume: not
	// backend.BinMount, because /airlock is the binary itself in the airlock
	// image (FROM scratch + /airlock), and a volume cannot be mounted below a file.
	installMount = "/airlock-bin"
	// projectVolume holds the copied project (and a keeper container reads it
	// after the primary ended).
	projectVolume = "airlock-project"
)

// runSize bounds the main container's tmpfs (Docker: size=16m);
// serviceRunSize a wrapped service's (Docker: size=1m).
var (
	runSize        = resource.MustParse("16Mi")
	serviceRunSize = resource.MustParse("1Mi")
)

// maxSpecArg is the largest spec the main container's command line can carry:
// Linux takes up to 128 KiB per argument, its NUL included.
const maxSpecArg = 128<<10 - 1

// PodInput is what the runtime knows of a sandbox when it makes its Pod.
type PodInput struct {
	// ID is the sandbox ID; the Pod is named PodName(ID).
	ID string
	// Namespace is the Pod's namespace ([kubernetes] namespace).
	Namespace string
	// AirlockImage is the image with the airlock binary at /airlock
	// ([kubernetes] image), run by the install container.
	AirlockImage string
	// Kind is backend.KindRun or backend.KindUp.
	Kind string
	// Labels are put on the Pod besides airlock's own (the caller's --label
	// ones); airlock's keys win. A value that cannot be a label value becomes
	// an annotation under the same key.
	Labels map[string]string
	// Manifest is the resolved manifest (enabled entries only).
	Manifest *manifest.Resolved
	// Spec is the supervisor's spec, built by the runtime (with Hold set). It
	// rides on the main container's command line, so it holds no secret.
	Spec *supervisor.Spec
	// RunAsUser and RunAsGroup are the main process's uid and gid when
	// sandbox.user gives them as numbers; nil leaves them to the image (its
	// USER, and the user's group in its /etc/passwd).
	RunAsUser, RunAsGroup *int64
	// MainUser, when set, is the sandbox user of a main container that runs as
	// root for its daemons (PodUser): the Pod records it (backend.LabelUser)
	// for the files API, which writes as that user.
	MainUser string
	// TTY allocates a terminal for the main command; Stdin keeps its stdin
	// open (for one attach).
	TTY, Stdin bool
	// StopTimeout is how long, in seconds, the cluster waits after SIGTERM
	// before it kills the Pod's containers; 0 computes it from the daemons'
	// timeouts, as `stop` does on Docker.
	StopTimeout int
	// PlanHash is backend.PlanHash of the manifest and image.
	PlanHash string
	// Owner is the control daemon's instance key ("" for none).
	Owner string
	// CLIPid and CLIStart identify the CLI process of a run sandbox, for the
	// reaper (0 and "" for none).
	CLIPid   int
	CLIStart string
	// Keeper keeps the project readable after the primary ended (run --output,
	// --keep): the project is an emptyDir that a second container, which idles
	// until the Pod is deleted, mounts too.
	Keeper bool
	// AllowPrivileged is [kubernetes] allow_privileged: without it,
	// sandbox.privileged is a config error.
	AllowPrivileged bool
	// Settings is what [kubernetes] sets on every Pod.
	Settings PodSettings
}

// BuildPod maps a sandbox onto one Pod (docs/kubernetes.md): an init container
// that installs the supervisor into an emptyDir, each service as a native
// sidecar (an init container that restarts always) reachable by its name on
// 127.0.0.1, and the main container running the supervisor as PID 1 with the
// spec on its command line. No value substituted into the manifest (host
// environment, vault) is written into the Pod: the spec refers to them by key
// path, and a service that needs some starts through `supervise wrap`, both
// waiting for a delivery over the Pod exec API. Problems of the manifest or
// config are *backend.Error with code 2.
func BuildPod(in PodInput) (*corev1.Pod, error) {
	r := in.Manifest
	switch {
	case r == nil:
		return nil, errors.New("cannot build the pod: no manifest")
	case in.Spec == nil:
		return nil, errors.New("cannot build the pod: no supervisor spec")
	case in.AirlockImage == "":
		return nil, errors.New("cannot build the pod: no airlock image")
	}
	if errs := validation.IsDNS1123Label(in.Namespace); len(errs) > 0 {
		return nil, configErr("cannot use the namespace %q on the kubernetes backend: %s", in.Namespace, strings.Join(errs, "; "))
	}
	if r.Sandbox.Image == "" {
		return nil, configErr("sandbox.image: is required on the kubernetes backend (a cluster has no builder: build and push the image, then set sandbox.image)")
	}
	if r.Sandbox.Privileged && !in.AllowPrivileged {
		return nil, configErr("sandbox.privileged: privileged sandboxes are not allowed on the kubernetes backend (set allow_privileged = true in the [kubernetes] table of config.toml)")
	}
	specJSON, err := json.Marshal(in.Spec)
	if err != nil {
		return nil, fmt.Errorf("cannot encode the supervisor spec: %w", err)
	}
	if len(specJSON) > maxSpecArg {
		return nil, configErr("cannot run this manifest on the kubernetes backend: its supervisor spec takes %d bytes, more than a command-line argument holds (%d)", len(specJSON), maxSpecArg)
	}
	stop := in.StopTimeout
	if stop <= 0 {
		stop = backend.StopSeconds(r)
	}
	labels, annotations, err := placeMeta(podMeta(in, stop))
	if err != nil {
		return nil, err
	}

	names := slices.Sorted(maps.Keys(r.Services))
	volumes := []corev1.Volume{
		{Name: binVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: runVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &runSize}}},
		{Name: stateVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	inits := []corev1.Container{installContainer(in.AirlockImage)}
	var hosts []string
	for _, name := range names {
		host := strings.ToLower(name)
		if errs := validation.IsDNS1123Subdomain(host); len(errs) > 0 {
			return nil, configErr("%s: the name cannot be a host name, and the kubernetes backend reaches services by name through the Pod's /etc/hosts (use letters, digits, '-' and '.')", manifest.KeyPath("services", name))
		}
		hosts = append(hosts, host)
		c, vol, err := serviceContainer(name, r)
		if err != nil {
			return nil, err
		}
		if vol != nil {
			volumes = append(volumes, *vol)
		}
		inits = append(inits, c)
	}
	main, err := mainContainer(in, specJSON)
	if err != nil {
		return nil, err
	}

	containers := []corev1.Container{main}
	if r.ProjectDir != "" {
		// The project is copied into an emptyDir at its path: any sandbox user may
		// write there (a user other than root could not make the path in the
		// image), and a keeper can read it after the primary ended.
		volumes = append(volumes, corev1.Volume{Name: projectVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		mount := corev1.VolumeMount{Name: projectVolume, MountPath: r.ProjectDir}
		containers[0].VolumeMounts = append(containers[0].VolumeMounts, mount)
		if in.Keeper {
			containers = append(containers, keeperContainer(in.AirlockImage, mount,
				corev1.VolumeMount{Name: stateVolume, MountPath: keeperStateDir, ReadOnly: true}))
		}
	}

	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      PodName(in.ID),
			Namespace: in.Namespace,
			Labels:    labels,
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			EnableServiceLinks:            ptr(false),
			AutomountServiceAccountToken:  ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(stop)),
			Hostname:                      backend.Hostname(in.ID),
			Volumes:                       volumes,
			InitContainers:                inits,
			Containers:                    containers,
		},
	}
	if len(annotations) > 0 {
		pod.Annotations = annotations
	}
	if len(hosts) > 0 {
		pod.Spec.HostAliases = []corev1.HostAlias{{IP: "127.0.0.1", Hostnames: hosts}}
	}
	applySettings(in.Settings, pod)
	return pod, nil
}

// keeperContainer idles (airlock supervise keep) with the project mounted, so that
// `run --output` can read it after the primary ended.
func keeperContainer(image string, mounts ...corev1.VolumeMount) corev1.Container {
	return corev1.Container{
		Name:            KeeperContainer,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/airlock", "supervise", "keep"},
		VolumeMounts:    mounts,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false),
			ReadOnlyRootFilesystem:   ptr(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// podMeta is the sandbox's metadata, as on its Docker objects (design.md §7).
func podMeta(in PodInput, stop int) map[string]string {
	meta := make(map[string]string, len(in.Labels)+10)
	maps.Copy(meta, in.Labels)
	meta[backend.LabelSandbox] = in.ID
	meta[backend.LabelKind] = in.Kind
	meta[backend.LabelRole] = "primary"
	meta[backend.LabelDaemons] = strconv.Itoa(len(in.Manifest.Daemons))
	meta[backend.LabelStopTimeout] = strconv.Itoa(stop)
	if in.Manifest.ProjectDir != "" {
		meta[backend.LabelProject] = in.Manifest.ProjectDir
	}
	if in.PlanHash != "" {
		meta[backend.LabelPlanHash] = in.PlanHash
	}
	if in.Owner != "" {
		meta[backend.LabelOwner] = in.Owner
	}
	if in.MainUser != "" {
		meta[backend.LabelUser] = in.MainUser
	}
	if in.CLIPid > 0 {
		meta[backend.LabelCLIPid] = strconv.Itoa(in.CLIPid)
		meta[backend.LabelCLIStart] = in.CLIStart
	}
	return meta
}

// installContainer copies the airlock binary of the airlock image into
// binVolume (`supervise install`), with nothing it does not need.
func installContainer(image string) corev1.Container {
	return corev1.Container{
		Name:            InstallContainer,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/airlock", "supervise", "install", installMount + "/airlock"},
		VolumeMounts:    []corev1.VolumeMount{{Name: binVolume, MountPath: installMount}},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false),
			ReadOnlyRootFilesystem:   ptr(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// serviceContainer is service name as a native sidecar. A service with
// substituted env values starts through `supervise wrap` from binVolume, which
// waits for them on a socket in a tmpfs of its own (the returned volume); its
// container holds only the names and key paths.
func serviceContainer(name string, r *manifest.Resolved) (corev1.Container, *corev1.Volume, error) {
	s := r.Services[name]
	c := corev1.Container{
		Name:            ContainerName(name),
		Image:           s.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		RestartPolicy:   ptr(corev1.ContainerRestartPolicyAlways),
	}
	if len(s.Command) > 0 {
		// Docker's command replaces the image's CMD and keeps its
		// ENTRYPOINT; so does a container's args.
		c.Args = slices.Clone(s.Command)
	}
	if len(s.Entrypoint) > 0 {
		// An entrypoint replaces the image's ENTRYPOINT and CMD, as in compose.
		c.Command = slices.Clone(s.Entrypoint)
		c.Args = slices.Clone(s.Command)
	}
	c.WorkingDir = s.WorkingDir
	secretEnv := map[string]string{} // env name → key path
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		key := manifest.KeyPath("services", name, "env", k)
		if r.Sources[key] != manifest.Literal {
			secretEnv[k] = key
			continue
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: s.Env[k]})
	}
	var vol *corev1.Volume
	if len(secretEnv) > 0 {
		argv := append(slices.Clone(s.Entrypoint), s.Command...)
		if len(argv) == 0 {
			return c, nil, configErr("%s: is required on the kubernetes backend for a service with substituted env values (they are handed over by a wrapper that runs command; the image's entrypoint is not known)", manifest.KeyPath("services", name, "command"))
		}
		wrap := []string{backend.SupervisorIn, "supervise", "wrap", "--socket", backend.SecretsSocketIn}
		for _, k := range slices.Sorted(maps.Keys(secretEnv)) {
			wrap = append(wrap, "--env", k+"="+secretEnv[k])
		}
		c.Command = append(append(wrap, "--"), argv...)
		c.Args = nil
		vol = &corev1.Volume{Name: dnsLabel(runVolumePrefix, name), VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &serviceRunSize},
		}}
		c.VolumeMounts = []corev1.VolumeMount{
			{Name: binVolume, MountPath: backend.BinMount, ReadOnly: true},
			{Name: vol.Name, MountPath: backend.RunMount},
		}
	}
	if h := s.Healthcheck; h != nil && len(h.Cmd) > 0 {
		p, err := probe(name, h)
		if err != nil {
			return c, nil, err
		}
		// A required service gates the main container: the kubelet starts
		// the next init container once a sidecar's startup probe succeeds.
		// An optional one only reports its readiness.
		if s.Required {
			c.StartupProbe = p
		} else {
			c.ReadinessProbe = p
		}
	}
	return c, vol, nil
}

// probe maps a service's healthcheck onto an exec probe: the interval is its
// period, the retries its failure threshold; durations are rounded up to whole
// seconds (at least 1), and an empty one is left to the cluster's default.
func probe(name string, h *manifest.Healthcheck) (*corev1.Probe, error) {
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: slices.Clone(h.Cmd)}}}
	for _, d := range []struct {
		key string
		val string
		dst *int32
	}{{"interval", h.Interval, &p.PeriodSeconds}, {"timeout", h.Timeout, &p.TimeoutSeconds}} {
		if d.val == "" {
			continue
		}
		v, err := time.ParseDuration(d.val)
		if err != nil || v < 0 {
			return nil, configErr("%s: invalid duration %q", manifest.KeyPath("services", name, "healthcheck", d.key), d.val)
		}
		if v > 0 {
			*d.dst = int32(min((v+time.Second-1)/time.Second, math.MaxInt32))
		}
	}
	if h.Retries > 0 {
		p.FailureThreshold = int32(min(h.Retries, math.MaxInt32))
	}
	return p, nil
}

// mainContainer runs the supervisor as PID 1 with the spec on its command line.
func mainContainer(in PodInput, specJSON []byte) (corev1.Container, error) {
	r := in.Manifest
	c := corev1.Container{
		Name:            MainContainer,
		Image:           r.Sandbox.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{backend.SupervisorIn, "supervise", supervisor.SpecFlag, string(specJSON)},
		WorkingDir:      in.Spec.Main.Cwd,
		TTY:             in.TTY,
		Stdin:           in.Stdin || in.TTY,
		StdinOnce:       in.Stdin || in.TTY,
		VolumeMounts: []corev1.VolumeMount{
			{Name: binVolume, MountPath: backend.BinMount, ReadOnly: true},
			{Name: runVolume, MountPath: backend.RunMount},
			{Name: stateVolume, MountPath: supervisor.StateDir},
		},
	}
	sc := &corev1.SecurityContext{RunAsUser: in.RunAsUser, RunAsGroup: in.RunAsGroup}
	add, err := capabilityNames("cap_add", r.Sandbox.CapAdd)
	if err != nil {
		return c, err
	}
	drop, err := capabilityNames("cap_drop", r.Sandbox.CapDrop)
	if err != nil {
		return c, err
	}
	if len(add) > 0 || len(drop) > 0 {
		sc.Capabilities = &corev1.Capabilities{Add: add, Drop: drop}
	}
	if r.Sandbox.Privileged {
		sc.Privileged = ptr(true)
	} else if backend.HardenAll(r) {
		// As Docker's no-new-privileges, which a privileged container
		// cannot have on a cluster (the API refuses both together).
		sc.AllowPrivilegeEscalation = ptr(false)
	}
	if *sc != (corev1.SecurityContext{}) {
		c.SecurityContext = sc
	}
	limits := corev1.ResourceList{}
	if r.Sandbox.CPUs > 0 {
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Round(r.Sandbox.CPUs*1000)), resource.DecimalSI)
	}
	if n := r.Parsed.Sandbox.Memory; n > 0 {
		limits[corev1.ResourceMemory] = *resource.NewQuantity(n, resource.BinarySI)
	}
	if len(limits) > 0 {
		c.Resources.Limits = limits
	}
	return c, nil
}

// capabilityNames are the capabilities of sandbox.<key> as Kubernetes names
// them: without CAP_, upper case ("NET_ADMIN", or "ALL").
func capabilityNames(key string, names []string) ([]corev1.Capability, error) {
	norm, err := manifest.NormalizeCapabilities(names)
	if err != nil {
		return nil, configErr("sandbox.%s: %v", key, err)
	}
	var out []corev1.Capability
	for _, n := range norm {
		out = append(out, corev1.Capability(strings.TrimPrefix(n, "CAP_")))
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }
