package kube_test

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/backend/kube"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/supervisor"
)

// Unit tests of the Pod mapping (no cluster): each builds the Pod of a small
// sandbox.toml and checks what `kubectl get pod -o yaml` would show of it.

type mapVault map[string]string

func (v mapVault) Lookup(name string) (string, bool, error) {
	val, ok := v[name]
	return val, ok, nil
}

// load resolves a sandbox.toml given as text, with no host environment and
// vault holding the given values.
func load(t *testing.T, toml string, vault map[string]string) *manifest.Resolved {
	t.Helper()
	l := &manifest.Loader{Getenv: func(string) (string, bool) { return "", false }, Vault: mapVault(vault)}
	r, err := l.LoadBytes("sandbox.toml", t.TempDir(), []byte(toml))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return r
}

// specFor builds the supervisor spec as the runtime does (backend.BuildSpec,
// held): literal env values written, substituted ones referred to by key path.
func specFor(r *manifest.Resolved) *supervisor.Spec {
	spec := backend.BuildSpec(&backend.Request{Command: []string{"make", "test"}}, r)
	spec.Hold = true
	return spec
}

const ownerKey = "0123456789abcdef0123456789abcdef"

// input is a run sandbox of the manifest r, as the runtime would describe it.
func input(r *manifest.Resolved) kube.PodInput {
	return kube.PodInput{
		ID: "box-1234", Namespace: "airlock", AirlockImage: "localhost/airlock:test",
		Kind: backend.KindRun, Manifest: r, Spec: specFor(r),
		PlanHash: "0123456789abcdef", Owner: ownerKey, CLIPid: 4242, CLIStart: "987654",
	}
}

// build returns the Pod of the manifest text, after edit changes the input.
func build(t *testing.T, toml string, edit func(*kube.PodInput)) *corev1.Pod {
	t.Helper()
	in := input(load(t, toml, nil))
	if edit != nil {
		edit(&in)
	}
	pod, err := kube.BuildPod(in)
	if err != nil {
		t.Fatalf("BuildPod: %v", err)
	}
	return pod
}

// buildErr returns BuildPod's error for the manifest text; it must be a config error.
func buildErr(t *testing.T, toml string, edit func(*kube.PodInput)) error {
	t.Helper()
	in := input(load(t, toml, nil))
	if edit != nil {
		edit(&in)
	}
	_, err := kube.BuildPod(in)
	var se *backend.Error
	if !errors.As(err, &se) || se.Code != 2 {
		t.Fatalf("BuildPod: got %v, want a config error (code 2)", err)
	}
	return err
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func container(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s among %v", name, names(cs))
	return corev1.Container{}
}

func mainOf(t *testing.T, pod *corev1.Pod) corev1.Container {
	t.Helper()
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("containers %v, want one", names(pod.Spec.Containers))
	}
	return container(t, pod.Spec.Containers, kube.MainContainer)
}

const minimal = "[sandbox]\nimage = \"debian:12\"\n"

// TestPodShape: the Pod is named after the sandbox, never restarts, gets
// neither service links nor a service account token, and is given the stop
// timeout (the longest daemon timeout and 5 s) to shut down.
func TestPodShape(t *testing.T) {
	pod := build(t, minimal+"[daemons.a]\ncommand = [\"a\"]\ntimeout = 20\n[daemons.b]\ncommand = [\"b\"]\n", nil)
	s := pod.Spec
	switch {
	case pod.Name != "airlock-box-1234" || pod.Namespace != "airlock":
		t.Errorf("pod %s/%s, want airlock/airlock-box-1234", pod.Namespace, pod.Name)
	case pod.APIVersion != "v1" || pod.Kind != "Pod":
		t.Errorf("apiVersion %q kind %q", pod.APIVersion, pod.Kind)
	case s.RestartPolicy != corev1.RestartPolicyNever:
		t.Errorf("restartPolicy %q", s.RestartPolicy)
	case s.EnableServiceLinks == nil || *s.EnableServiceLinks:
		t.Errorf("enableServiceLinks %v, want false", s.EnableServiceLinks)
	case s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken:
		t.Errorf("automountServiceAccountToken %v, want false", s.AutomountServiceAccountToken)
	case s.TerminationGracePeriodSeconds == nil || *s.TerminationGracePeriodSeconds != 25:
		t.Errorf("terminationGracePeriodSeconds %v, want 25", s.TerminationGracePeriodSeconds)
	case s.Hostname != "box-1234":
		t.Errorf("hostname %q, want box-1234", s.Hostname)
	}
}

// TestMetadata: the Pod carries the Docker objects' labels; values that are
// not label values (the project path, a long ID, a user label's path) and the
// values only ever read (CLI pid and start, stop timeout) are annotations
// under the same keys.
func TestMetadata(t *testing.T) {
	longID := strings.Repeat("b", 70)
	cases := []struct {
		name        string
		edit        func(*kube.PodInput)
		labels      map[string]string
		annotations map[string]string
		absent      []string
	}{{
		name: "airlock's own",
		labels: map[string]string{
			backend.LabelSandbox: "box-1234", backend.LabelKind: "run", backend.LabelRole: "primary",
			backend.LabelOwner: ownerKey, backend.LabelPlanHash: "0123456789abcdef", backend.LabelDaemons: "0",
		},
		annotations: map[string]string{
			backend.LabelCLIPid: "4242", backend.LabelCLIStart: "987654", "dev.airlock.stop-timeout": "5",
		},
	}, {
		name:   "an up sandbox has no CLI",
		edit:   func(in *kube.PodInput) { in.Kind, in.CLIPid, in.CLIStart = backend.KindUp, 0, "" },
		labels: map[string]string{backend.LabelKind: "up"},
		absent: []string{backend.LabelCLIPid, backend.LabelCLIStart},
	}, {
		name:   "no owner",
		edit:   func(in *kube.PodInput) { in.Owner = "" },
		absent: []string{backend.LabelOwner},
	}, {
		name:        "an ID too long for a label value",
		edit:        func(in *kube.PodInput) { in.ID = longID },
		annotations: map[string]string{backend.LabelSandbox: longID},
	}, {
		name: "user labels",
		edit: func(in *kube.PodInput) {
			in.Labels = map[string]string{"team": "infra", "example.com/ticket": "OPS-1", "note": "a/b c", backend.LabelKind: "spoofed"}
		},
		labels:      map[string]string{"team": "infra", "example.com/ticket": "OPS-1", backend.LabelKind: "run"},
		annotations: map[string]string{"note": "a/b c"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := build(t, minimal, c.edit)
			for k, v := range c.labels {
				if got, ok := pod.Labels[k]; !ok || got != v {
					t.Errorf("label %s = %q (%v), want %q", k, got, ok, v)
				}
				if _, ok := pod.Annotations[k]; ok {
					t.Errorf("%s is both a label and an annotation", k)
				}
			}
			for k, v := range c.annotations {
				if got, ok := pod.Annotations[k]; !ok || got != v {
					t.Errorf("annotation %s = %q (%v), want %q", k, got, ok, v)
				}
				if _, ok := pod.Labels[k]; ok {
					t.Errorf("%s is both a label and an annotation", k)
				}
				if got, _ := kube.MetaValue(&pod.ObjectMeta, k); got != v {
					t.Errorf("MetaValue(%s) = %q, want %q", k, got, v)
				}
			}
			for _, k := range c.absent {
				if v, ok := kube.MetaValue(&pod.ObjectMeta, k); ok {
					t.Errorf("%s = %q, want none", k, v)
				}
			}
			if got := pod.Annotations[backend.LabelProject]; got == "" || !strings.HasPrefix(got, "/") {
				t.Errorf("annotation %s = %q, want the project dir", backend.LabelProject, got)
			}
		})
	}
}

// TestInvalidLabelKey: a label key Kubernetes does not take is a config error
// naming it.
func TestInvalidLabelKey(t *testing.T) {
	err := buildErr(t, minimal, func(in *kube.PodInput) { in.Labels = map[string]string{"bad key!": "x"} })
	if !strings.Contains(err.Error(), `"bad key!"`) || !strings.Contains(err.Error(), "kubernetes") {
		t.Errorf("error %q does not name the key and the backend", err)
	}
}

// TestInitContainerOrder: the supervisor is installed first, then the
// services start in name order; the main container comes after them all.
func TestInitContainerOrder(t *testing.T) {
	pod := build(t, minimal+`
[services.zeta]
image = "z"
[services.alpha]
image = "a"
[services.mid]
image = "m"
`, nil)
	want := []string{kube.InstallContainer, "svc-alpha", "svc-mid", "svc-zeta"}
	if got := names(pod.Spec.InitContainers); !slices.Equal(got, want) {
		t.Errorf("initContainers %v, want %v", got, want)
	}
}

// TestInstallContainer: the install container runs `supervise install` from
// the airlock image into the shared emptyDir, with no privilege it does not
// need; it is a plain init container (it ends).
func TestInstallContainer(t *testing.T) {
	pod := build(t, minimal, nil)
	c := container(t, pod.Spec.InitContainers, kube.InstallContainer)
	if c.Image != "localhost/airlock:test" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %q pull %q", c.Image, c.ImagePullPolicy)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != "airlock-bin" || c.VolumeMounts[0].ReadOnly {
		t.Fatalf("mounts %+v, want airlock-bin read-write", c.VolumeMounts)
	}
	dest := c.VolumeMounts[0].MountPath + "/airlock"
	if want := []string{"/airlock", "supervise", "install", dest}; !slices.Equal(c.Command, want) {
		t.Errorf("command %q, want %q", c.Command, want)
	}
	if strings.HasPrefix(c.VolumeMounts[0].MountPath, "/airlock/") {
		t.Errorf("airlock-bin mounted at %s, below the binary /airlock of the airlock image", c.VolumeMounts[0].MountPath)
	}
	if c.RestartPolicy != nil {
		t.Errorf("restartPolicy %v, want none", *c.RestartPolicy)
	}
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("securityContext %+v, want no escalation and every capability dropped", sc)
	}
}

// TestServicesAreNativeSidecars: each service is an init container that
// restarts always (a native sidecar), with its image, command as args (the
// image's entrypoint stays) and literal env.
func TestServicesAreNativeSidecars(t *testing.T) {
	pod := build(t, minimal+`
[services.db]
image = "postgres:16"
command = ["postgres", "-c", "fsync=off"]
env = { POSTGRES_PASSWORD = "pw", A = "1" }
[services.cache]
image = "redis:7"
`, nil)
	db := container(t, pod.Spec.InitContainers, "svc-db")
	switch {
	case db.RestartPolicy == nil || *db.RestartPolicy != corev1.ContainerRestartPolicyAlways:
		t.Errorf("restartPolicy %v, want Always", db.RestartPolicy)
	case db.Image != "postgres:16" || db.ImagePullPolicy != corev1.PullIfNotPresent:
		t.Errorf("image %q pull %q", db.Image, db.ImagePullPolicy)
	case db.Command != nil || !slices.Equal(db.Args, []string{"postgres", "-c", "fsync=off"}):
		t.Errorf("command %q args %q, want the service command as args", db.Command, db.Args)
	case !slices.Equal(db.Env, []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "POSTGRES_PASSWORD", Value: "pw"}}):
		t.Errorf("env %+v", db.Env)
	}
	cache := container(t, pod.Spec.InitContainers, "svc-cache")
	if cache.Args != nil || cache.Command != nil {
		t.Errorf("a service without command: command %q args %q, want the image's", cache.Command, cache.Args)
	}
}

// TestServiceProbes: a required service's healthcheck is a startup probe (the
// main container waits for it), an optional one's a readiness probe (it does
// not gate); durations round up to whole seconds.
func TestServiceProbes(t *testing.T) {
	cases := []struct {
		name, toml         string
		startup, readiness *corev1.Probe
	}{{
		name: "required with healthcheck",
		toml: "[services.db.healthcheck]\ncmd = [\"pg_isready\", \"-q\"]\ninterval = \"2s\"\ntimeout = \"4500ms\"\nretries = 7\n",
		startup: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"pg_isready", "-q"}}},
			PeriodSeconds: 2, TimeoutSeconds: 5, FailureThreshold: 7},
	}, {
		name: "healthcheck defaults",
		toml: "[services.db.healthcheck]\ncmd = [\"true\"]\n",
		startup: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
			PeriodSeconds: 1, TimeoutSeconds: 3, FailureThreshold: 30},
	}, {
		name: "sub-second interval",
		toml: "[services.db.healthcheck]\ncmd = [\"true\"]\ninterval = \"100ms\"\n",
		startup: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
			PeriodSeconds: 1, TimeoutSeconds: 3, FailureThreshold: 30},
	}, {
		name: "optional with healthcheck",
		toml: "required = false\n[services.db.healthcheck]\ncmd = [\"true\"]\n",
		readiness: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
			PeriodSeconds: 1, TimeoutSeconds: 3, FailureThreshold: 30},
	}, {
		name: "required without healthcheck",
	}, {
		name: "optional without healthcheck",
		toml: "required = false\n",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The case's keys follow the service's image.
			pod := build(t, minimal+"[services.db]\nimage = \"pg\"\n"+c.toml, nil)
			db := container(t, pod.Spec.InitContainers, "svc-db")
			if !probeEqual(db.StartupProbe, c.startup) {
				t.Errorf("startupProbe %+v, want %+v", db.StartupProbe, c.startup)
			}
			if !probeEqual(db.ReadinessProbe, c.readiness) {
				t.Errorf("readinessProbe %+v, want %+v", db.ReadinessProbe, c.readiness)
			}
			if db.LivenessProbe != nil {
				t.Errorf("livenessProbe %+v, want none", db.LivenessProbe)
			}
		})
	}
}

func probeEqual(a, b *corev1.Probe) bool {
	if a == nil || b == nil {
		return a == b
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestHostAliases: every enabled service's name resolves to 127.0.0.1 (the Pod
// shares one network namespace), lowercased as host names are.
func TestHostAliases(t *testing.T) {
	pod := build(t, minimal+"[services.db]\nimage = \"pg\"\n[services.Cache]\nimage = \"redis\"\n[services.\"queue.local\"]\nimage = \"q\"\n", nil)
	want := []corev1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"cache", "db", "queue.local"}}}
	if got := pod.Spec.HostAliases; !slices.EqualFunc(got, want, func(a, b corev1.HostAlias) bool {
		return a.IP == b.IP && slices.Equal(a.Hostnames, b.Hostnames)
	}) {
		t.Errorf("hostAliases %+v, want %+v", got, want)
	}
	if got := build(t, minimal, nil).Spec.HostAliases; got != nil {
		t.Errorf("hostAliases without services %+v, want none", got)
	}
}

// TestServiceNameNotAHostName: a service name that cannot be a host name is a
// config error naming the service.
func TestServiceNameNotAHostName(t *testing.T) {
	err := buildErr(t, minimal+"[services.my_db]\nimage = \"pg\"\n", nil)
	if !strings.Contains(err.Error(), "services.my_db") {
		t.Errorf("error %q does not name services.my_db", err)
	}
}

// TestDisabledServicesAbsent: a disabled service has no container and no host alias.
func TestDisabledServicesAbsent(t *testing.T) {
	pod := build(t, minimal+"[services.db]\nimage = \"pg\"\n[services.off]\nimage = \"x\"\nenabled = false\n", nil)
	if got := names(pod.Spec.InitContainers); !slices.Equal(got, []string{kube.InstallContainer, "svc-db"}) {
		t.Errorf("initContainers %v", got)
	}
	if got := pod.Spec.HostAliases[0].Hostnames; !slices.Equal(got, []string{"db"}) {
		t.Errorf("hostAliases %v", got)
	}
}

// TestVolumesAndMounts: the supervisor's emptyDir is mounted read-only at
// BinMount, a 16 MiB memory emptyDir at RunMount (Docker's tmpfs), and the
// state dir and the project (copied in) are emptyDirs the sandbox user can write.
func TestVolumesAndMounts(t *testing.T) {
	pod := build(t, minimal, nil)
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	if len(vols) != 4 {
		t.Errorf("volumes %v, want four", slices.Sorted(maps.Keys(vols)))
	}
	for _, name := range []string{"airlock-bin", "airlock-run", "airlock-state", "airlock-project"} {
		if vols[name].EmptyDir == nil {
			t.Errorf("volume %s is not an emptyDir: %+v", name, vols[name])
		}
	}
	if run := vols["airlock-run"].EmptyDir; run != nil && (run.Medium != corev1.StorageMediumMemory || run.SizeLimit == nil || run.SizeLimit.String() != "16Mi") {
		t.Errorf("airlock-run %+v, want medium Memory, sizeLimit 16Mi", run)
	}
	want := []corev1.VolumeMount{
		{Name: "airlock-bin", MountPath: backend.BinMount, ReadOnly: true},
		{Name: "airlock-run", MountPath: backend.RunMount},
		{Name: "airlock-state", MountPath: supervisor.StateDir},
		{Name: "airlock-project", MountPath: mainOf(t, pod).WorkingDir},
	}
	if got := mainOf(t, pod).VolumeMounts; !slices.Equal(got, want) {
		t.Errorf("volumeMounts %+v, want %+v", got, want)
	}
}

// TestMainContainer: the main container runs the supervisor from BinMount as
// PID 1 with the spec on its command line, in the spec's working directory,
// with stdin and a terminal as asked.
func TestMainContainer(t *testing.T) {
	cases := []struct {
		name                   string
		tty, stdin             bool
		wantStdin, wantOnceTTY bool
	}{
		{"no stdin", false, false, false, false},
		{"stdin", false, true, true, false},
		{"tty", true, false, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := build(t, "[sandbox]\nimage = \"debian:12\"\nworkdir = \"/src\"\n", func(in *kube.PodInput) {
				in.TTY, in.Stdin = c.tty, c.stdin
				in.Spec.Main.Cwd = "/src"
			})
			m := mainOf(t, pod)
			if m.Image != "debian:12" || m.ImagePullPolicy != corev1.PullIfNotPresent {
				t.Errorf("image %q pull %q", m.Image, m.ImagePullPolicy)
			}
			if len(m.Command) != 4 || m.Command[0] != backend.SupervisorIn || m.Command[1] != "supervise" || m.Command[2] != supervisor.SpecFlag {
				t.Fatalf("command %q, want the supervisor with %s", m.Command, supervisor.SpecFlag)
			}
			if m.Args != nil {
				t.Errorf("args %q, want none", m.Args)
			}
			spec, err := supervisor.ParseSpec([]byte(m.Command[3]))
			if err != nil {
				t.Fatalf("the spec on the command line: %v", err)
			}
			if !slices.Equal(spec.Main.Argv, []string{"make", "test"}) {
				t.Errorf("spec main argv %q", spec.Main.Argv)
			}
			if m.WorkingDir != "/src" {
				t.Errorf("workingDir %q, want /src", m.WorkingDir)
			}
			if m.Stdin != c.wantStdin || m.StdinOnce != c.wantStdin || m.TTY != c.wantOnceTTY {
				t.Errorf("stdin %v stdinOnce %v tty %v", m.Stdin, m.StdinOnce, m.TTY)
			}
		})
	}
}

// TestNoSubstitutedValueInPod: a value substituted from the vault (in [env], a
// daemon's env, a service's env) appears nowhere in the Pod; the spec and a
// wrapped service refer to it by key path, and literal values stay.
func TestNoSubstitutedValueInPod(t *testing.T) {
	const secret = "s3cr3t-vault-value"
	r := load(t, minimal+`
[env]
TOKEN = "${API_TOKEN}"
PLAIN = "visible-literal"
[daemons.worker]
command = ["worker"]
env = { KEY = "prefix-${API_TOKEN}" }
[services.db]
image = "postgres:16"
command = ["postgres"]
env = { POSTGRES_PASSWORD = "${API_TOKEN}", POSTGRES_DB = "app" }
`, map[string]string{"API_TOKEN": secret})
	pod, err := kube.BuildPod(input(r))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Fatalf("the Pod holds the vault value:\n%s", b)
	}
	spec := mainOf(t, pod).Command[3]
	for _, want := range []string{`"visible-literal"`, `"secret":"env.TOKEN"`, `"secret":"daemons.worker.env.KEY"`} {
		if !strings.Contains(spec, want) {
			t.Errorf("the spec lacks %s: %s", want, spec)
		}
	}
	db := container(t, pod.Spec.InitContainers, "svc-db")
	wantCmd := []string{backend.SupervisorIn, "supervise", "wrap", "--socket", backend.SecretsSocketIn,
		"--env", "POSTGRES_PASSWORD=services.db.env.POSTGRES_PASSWORD", "--", "postgres"}
	if !slices.Equal(db.Command, wantCmd) || db.Args != nil {
		t.Errorf("command %q args %q, want %q", db.Command, db.Args, wantCmd)
	}
	if !slices.Equal(db.Env, []corev1.EnvVar{{Name: "POSTGRES_DB", Value: "app"}}) {
		t.Errorf("env %+v, want the literal only", db.Env)
	}
}

// TestWrappedServiceMounts: a wrapped service runs the supervisor from the
// shared emptyDir and waits for its values on a memory emptyDir of its own.
func TestWrappedServiceMounts(t *testing.T) {
	r := load(t, minimal+"[services.db]\nimage = \"pg\"\ncommand = [\"postgres\"]\nenv = { P = \"${X}\" }\n", map[string]string{"X": "v"})
	pod, err := kube.BuildPod(input(r))
	if err != nil {
		t.Fatal(err)
	}
	db := container(t, pod.Spec.InitContainers, "svc-db")
	if len(db.VolumeMounts) != 2 || db.VolumeMounts[0] != (corev1.VolumeMount{Name: "airlock-bin", MountPath: backend.BinMount, ReadOnly: true}) || db.VolumeMounts[1].MountPath != backend.RunMount {
		t.Fatalf("volumeMounts %+v", db.VolumeMounts)
	}
	own := db.VolumeMounts[1].Name
	if own == "airlock-run" {
		t.Errorf("the service shares the main container's tmpfs (and secrets socket)")
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == own && (v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory) {
			t.Errorf("volume %s: %+v, want a memory emptyDir", own, v)
		}
	}
}

// TestWrappedServiceNeedsCommand: without command a service's substituted env
// cannot be handed over (the image's entrypoint is not known): a config error.
func TestWrappedServiceNeedsCommand(t *testing.T) {
	r := load(t, minimal+"[services.db]\nimage = \"pg\"\nenv = { P = \"${X}\" }\n", map[string]string{"X": "v"})
	_, err := kube.BuildPod(input(r))
	var se *backend.Error
	if !errors.As(err, &se) || se.Code != 2 || !strings.Contains(err.Error(), "services.db.command") {
		t.Errorf("got %v, want a config error naming services.db.command", err)
	}
}

// TestSecurityContext: the main container runs as a numeric sandbox.user, gets
// the capabilities as Kubernetes names them (no CAP_, upper case), and cannot
// gain privileges only when every process is hardened.
func TestSecurityContext(t *testing.T) {
	uid, gid := int64(1000), int64(100)
	cases := []struct {
		name string
		toml string
		edit func(*kube.PodInput)
		want *corev1.SecurityContext
	}{{
		name: "defaults: hardened, image user",
		want: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false)},
	}, {
		name: "numeric user and group",
		edit: func(in *kube.PodInput) { in.RunAsUser, in.RunAsGroup = &uid, &gid },
		want: &corev1.SecurityContext{RunAsUser: &uid, RunAsGroup: &gid, AllowPrivilegeEscalation: ptr(false)},
	}, {
		name: "capabilities",
		toml: "cap_add = [\"net_admin\", \"CAP_SYS_TIME\"]\ncap_drop = [\"all\"]\n",
		want: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false), Capabilities: &corev1.Capabilities{
			Add: []corev1.Capability{"NET_ADMIN", "SYS_TIME"}, Drop: []corev1.Capability{"ALL"}}},
	}, {
		name: "main process not hardened",
		toml: "harden = false\n",
		want: nil,
	}, {
		name: "a daemon not hardened",
		toml: "[daemons.d]\ncommand = [\"d\"]\nharden = false\n",
		want: nil,
	}, {
		name: "privileged when allowed",
		toml: "privileged = true\n",
		edit: func(in *kube.PodInput) { in.AllowPrivileged = true },
		want: &corev1.SecurityContext{Privileged: ptr(true)},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := build(t, minimal+c.toml, c.edit)
			got, _ := json.Marshal(mainOf(t, pod).SecurityContext)
			want, _ := json.Marshal(c.want)
			if string(got) != string(want) {
				t.Errorf("securityContext %s, want %s", got, want)
			}
		})
	}
}

// TestPodUserRootBeside: a daemon (a root setup step) of another user than a
// non-root sandbox.user makes the main container run as root, with the
// sandbox user for the main command, exec and the daemons without a user in
// the spec, and recorded on the Pod for the files API; without such a daemon
// the container runs as sandbox.user and the spec names no user.
func TestPodUserRootBeside(t *testing.T) {
	uid, gid := int64(1000), int64(100)
	for _, c := range []struct {
		name, toml     string
		wantRoot       bool
		mainUser, dUsr string
	}{
		{name: "root step", toml: "user = \"1000:100\"\n[daemons.setup]\ncommand = [\"s\"]\noneshot = true\nuser = \"root\"\n[daemons.web]\ncommand = [\"w\"]\n",
			wantRoot: true, mainUser: "1000:100", dUsr: "1000:100"},
		{name: "same user", toml: "user = \"1000:100\"\n[daemons.setup]\ncommand = [\"s\"]\noneshot = true\nuser = \"1000:100\"\n[daemons.web]\ncommand = [\"w\"]\n"},
		{name: "root sandbox", toml: "user = \"0\"\n[daemons.setup]\ncommand = [\"s\"]\nuser = \"postgres\"\n[daemons.web]\ncommand = [\"w\"]\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := load(t, minimal+c.toml, nil)
			in := input(r)
			runUID, runGID, mainUser := kube.PodUser(r, in.Spec, &uid, &gid)
			in.RunAsUser, in.RunAsGroup, in.MainUser = runUID, runGID, mainUser
			if c.wantRoot != (runUID != nil && *runUID == 0 && runGID != nil && *runGID == 0) || (!c.wantRoot && runUID != &uid) {
				t.Errorf("runAsUser %v runAsGroup %v, want root: %v", runUID, runGID, c.wantRoot)
			}
			if mainUser != c.mainUser || in.Spec.Main.User != c.mainUser {
				t.Errorf("main user %q (spec %q), want %q", mainUser, in.Spec.Main.User, c.mainUser)
			}
			for _, d := range in.Spec.Daemons {
				if d.Name == "web" && d.User != c.dUsr {
					t.Errorf("daemon web's user %q, want %q", d.User, c.dUsr)
				}
			}
			pod, err := kube.BuildPod(in)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := kube.MetaValue(&pod.ObjectMeta, backend.LabelUser); got != c.mainUser {
				t.Errorf("the Pod's %s is %q, want %q", backend.LabelUser, got, c.mainUser)
			}
			if sc := mainOf(t, pod).SecurityContext; c.wantRoot && (sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0) {
				t.Errorf("securityContext %+v, want runAsUser 0", sc)
			}
		})
	}
}

// TestPrivilegedNotAllowed: sandbox.privileged without [kubernetes]
// allow_privileged is a config error naming the key.
func TestPrivilegedNotAllowed(t *testing.T) {
	err := buildErr(t, minimal+"privileged = true\n", nil)
	if !strings.Contains(err.Error(), "sandbox.privileged") || !strings.Contains(err.Error(), "allow_privileged") {
		t.Errorf("error %q does not name sandbox.privileged and allow_privileged", err)
	}
}

// TestResources: sandbox.cpus and sandbox.memory are the main container's limits.
func TestResources(t *testing.T) {
	cases := []struct {
		toml      string
		cpu, mem  string
		unlimited bool
	}{
		{toml: "cpus = 1.5\nmemory = \"512m\"\n", cpu: "1500m", mem: "512Mi"},
		{toml: "cpus = 0.25\n", cpu: "250m"},
		{toml: "memory = \"2g\"\n", mem: "2Gi"},
		{toml: "", unlimited: true},
	}
	for _, c := range cases {
		m := mainOf(t, build(t, minimal+c.toml, nil))
		lim := m.Resources.Limits
		if c.unlimited {
			if lim != nil || m.Resources.Requests != nil {
				t.Errorf("%q: resources %+v, want none", c.toml, m.Resources)
			}
			continue
		}
		if q, ok := lim[corev1.ResourceCPU]; (c.cpu != "") != ok || (ok && q.String() != c.cpu) {
			t.Errorf("%q: cpu limit %v (%v), want %q", c.toml, q.String(), ok, c.cpu)
		}
		if q, ok := lim[corev1.ResourceMemory]; (c.mem != "") != ok || (ok && q.String() != c.mem) {
			t.Errorf("%q: memory limit %v (%v), want %q", c.toml, q.String(), ok, c.mem)
		}
	}
}

// TestNamespaceMustBeALabel: a namespace Kubernetes cannot have is a config error.
func TestNamespaceMustBeALabel(t *testing.T) {
	buildErr(t, minimal, func(in *kube.PodInput) { in.Namespace = "Not_Valid" })
}

func ptr[T any](v T) *T { return &v }

// TestKeeper: a run whose files are read after it ended gets its project on an
// emptyDir that an idle keeper container mounts too; without it, neither.
func TestKeeper(t *testing.T) {
	plain := build(t, minimal, nil)
	if len(plain.Spec.Containers) != 1 {
		t.Errorf("containers %v, want the primary only", names(plain.Spec.Containers))
	}
	pod := build(t, minimal, func(in *kube.PodInput) { in.Keeper = true })
	keeper := container(t, pod.Spec.Containers, kube.KeeperContainer)
	main := container(t, pod.Spec.Containers, kube.MainContainer)
	project := main.WorkingDir
	mounted := func(c corev1.Container) string {
		for _, m := range c.VolumeMounts {
			if m.MountPath == project {
				return m.Name
			}
		}
		return ""
	}
	if v := mounted(main); v == "" || mounted(keeper) != v {
		t.Errorf("the project %s is not one volume in both containers: primary %q, keeper %q", project, mounted(main), mounted(keeper))
	}
	if got := strings.Join(keeper.Command, " "); got != "/airlock supervise keep" || keeper.Image != input(load(t, minimal, nil)).AirlockImage {
		t.Errorf("keeper runs %q from %s", got, keeper.Image)
	}
}
