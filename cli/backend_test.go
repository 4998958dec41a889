package cli

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/imagetar"
	"github.com/airlock-dev/airlock/userconfig"
)

// The backend choice: --backend > AIRLOCK_BACKEND > runtime.backend of
// config.toml > docker; validate and config apply the backend's checks.

// userHome is a hermetic environment whose config.toml holds config ("" = no
// config.toml), plus extra variables.
func userHome(t *testing.T, config string, extra map[string]string) map[string]string {
	t.Helper()
	home := t.TempDir()
	vars := map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "config"), "XDG_DATA_HOME": filepath.Join(home, "data")}
	if config != "" {
		writeFile(t, filepath.Join(home, "config", "airlock", "config.toml"), config)
	}
	for k, v := range extra {
		vars[k] = v
	}
	return vars
}

// A manifest that is valid on Docker and refused on Kubernetes (sandbox.ports).
const dockerOnly = "[sandbox]\nimage = \"busybox\"\nports = [\"8080:80\"]\n"

const kubePortsError = "sandbox.toml:3: sandbox.ports: cannot publish ports on the kubernetes backend"

func TestBackendPrecedence(t *testing.T) {
	t.Parallel()
	const kubeConfig = "[runtime]\nbackend = \"kubernetes\"\n"
	const dockerConfig = "[runtime]\nbackend = \"docker\"\n"
	cases := []struct {
		name   string
		config string
		env    string // AIRLOCK_BACKEND; "-" = unset
		flag   string // --backend; "" = not given
		want   string
	}{
		{"default", "", "-", "", "docker"},
		{"config", kubeConfig, "-", "", "kubernetes"},
		{"config docker", dockerConfig, "-", "", "docker"},
		{"env over config", kubeConfig, "docker", "", "docker"},
		{"env over default", "", "kubernetes", "", "kubernetes"},
		{"empty env is unset", kubeConfig, "", "", "kubernetes"},
		{"flag over env", "", "docker", "kubernetes", "kubernetes"},
		{"flag over env and config", kubeConfig, "kubernetes", "docker", "docker"},
		{"flag over config", kubeConfig, "-", "docker", "docker"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			extra := map[string]string{}
			if c.env != "-" {
				extra[backendEnv] = c.env
			}
			vars := userHome(t, c.config, extra)
			args := []string{"--file", filepath.Join(project(t, dockerOnly), "sandbox.toml")}
			if c.flag != "" {
				args = append(args, "--backend", c.flag)
			}
			r := airlock(t, vars, append(args, "validate")...)
			switch c.want {
			case "docker":
				if r.code != 0 || strings.Contains(r.stdout, "kubernetes") {
					t.Fatalf("exit %d, stdout %q, stderr %q; want a valid manifest on docker", r.code, r.stdout, r.stderr)
				}
			case "kubernetes":
				if r.code != ExitUsage || !strings.HasPrefix(r.stderr, "config error: ") || !strings.Contains(r.stderr, kubePortsError) {
					t.Fatalf("exit %d, stderr %q; want the kubernetes backend's config error", r.code, r.stderr)
				}
			}
		})
	}
}

// TestBackendChoice: what app.backend returns, with where the name came from
// and the [kubernetes] settings.
func TestBackendChoice(t *testing.T) {
	t.Parallel()
	newApp := func(vars map[string]string, flag string) *app {
		a := &app{getenv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
		if flag != "" {
			a.opts.backend, a.opts.backendSet = flag, true
		}
		return a
	}
	vars := userHome(t, "", nil)
	b, err := newApp(vars, "").backend()
	if err != nil {
		t.Fatal(err)
	}
	want := userconfig.Kubernetes{Namespace: "airlock", Image: imagetar.ImageRef(BuildID), CreateNamespace: true}
	if b.Name != "docker" || b.From != "default" || b.Kube() || !reflect.DeepEqual(b.Kubernetes, want) {
		t.Fatalf("no config: %+v, want docker from default with %+v", b, want)
	}
	if !strings.HasPrefix(b.Kubernetes.Image, "localhost/airlock:") {
		t.Fatalf("default image %q", b.Kubernetes.Image)
	}

	vars = userHome(t, "[runtime]\nbackend = \"kubernetes\"\n[kubernetes]\nnamespace = \"ci\"\nimage = \"registry.example.com/airlock:1\"\nallow_privileged = true\ncontext = \"prod\"\ncreate_namespace = false\n", nil)
	file := filepath.Join(vars["XDG_CONFIG_HOME"], "airlock", "config.toml")
	b, err = newApp(vars, "").backend()
	if err != nil {
		t.Fatal(err)
	}
	want = userconfig.Kubernetes{Namespace: "ci", Image: "registry.example.com/airlock:1", AllowPrivileged: true, Context: "prod"}
	if b.Name != "kubernetes" || b.From != file || !b.Kube() || !reflect.DeepEqual(b.Kubernetes, want) {
		t.Fatalf("config: %+v, want kubernetes from %s with %+v", b, file, want)
	}
	if mb := b.manifestBackend(); mb.Name != "kubernetes" || !mb.AllowPrivileged {
		t.Fatalf("manifest backend %+v", mb)
	}

	vars[backendEnv] = "docker"
	if b, err = newApp(vars, "").backend(); err != nil || b.Name != "docker" || b.From != backendEnv || !reflect.DeepEqual(b.Kubernetes, want) {
		t.Fatalf("env: %+v %v", b, err)
	}
	if b, err = newApp(vars, "kubernetes").backend(); err != nil || b.Name != "kubernetes" || b.From != "--backend" {
		t.Fatalf("flag: %+v %v", b, err)
	}
}

// TestBackendUnknownIsAUsageError: an unknown name exits 2, naming the value,
// the choices and where it came from.
func TestBackendUnknownIsAUsageError(t *testing.T) {
	t.Parallel()
	manifest := filepath.Join(project(t, "[sandbox]\nimage = \"busybox\"\n"), "sandbox.toml")
	cases := []struct {
		name   string
		config string
		env    map[string]string
		args   []string
		stderr string
	}{
		{"flag", "", nil, []string{"--backend", "k8s", "validate"},
			`airlock: invalid --backend: unknown backend "k8s" (want docker or kubernetes)`},
		{"empty flag", "", nil, []string{"--backend=", "validate"},
			`airlock: invalid --backend: unknown backend "" (want docker or kubernetes)`},
		{"flag on any command", "", nil, []string{"--backend", "podman", "version"},
			`airlock: invalid --backend: unknown backend "podman" (want docker or kubernetes)`},
		{"flag after the command", "", nil, []string{"config", "--backend", "Kubernetes"},
			`airlock: invalid --backend: unknown backend "Kubernetes" (want docker or kubernetes)`},
		{"env", "", map[string]string{backendEnv: "k8s"}, []string{"validate"},
			`airlock: invalid AIRLOCK_BACKEND: unknown backend "k8s" (want docker or kubernetes)`},
		{"env on config", "", map[string]string{backendEnv: "nomad"}, []string{"config"},
			`airlock: invalid AIRLOCK_BACKEND: unknown backend "nomad" (want docker or kubernetes)`},
		{"config file", "[runtime]\nbackend = \"k8s\"\n", nil, []string{"validate"},
			`/config/airlock/config.toml:2: runtime.backend: unknown backend "k8s" (want docker or kubernetes)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			vars := userHome(t, c.config, c.env)
			r := airlock(t, vars, append([]string{"--file", manifest}, c.args...)...)
			if r.code != ExitUsage || !strings.Contains(r.stderr, c.stderr) || r.stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and %q", r.code, r.stdout, r.stderr, c.stderr)
			}
			if c.config != "" && !strings.HasPrefix(r.stderr, "config error: ") {
				t.Fatalf("stderr %q: a config.toml problem is a config error", r.stderr)
			}
		})
	}
	// A valid flag does not need a manifest or a config on commands that do not use it.
	if r := airlock(t, nil, "--backend", "kubernetes", "version"); r.code != 0 {
		t.Fatalf("version --backend kubernetes: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestValidateAndConfigOnKubernetes: validate and config report the keys the
// kubernetes backend cannot take, print its warnings, and pass what it takes.
func TestValidateAndConfigOnKubernetes(t *testing.T) {
	t.Parallel()
	kube := map[string]string{backendEnv: "kubernetes"}
	cases := []struct {
		name, manifest string
		config         string
		code           int
		stderr         []string
	}{
		{"valid", "[sandbox]\nimage = \"busybox\"\nuser = \"1000:1000\"\n", "", 0, nil},
		{"ports", dockerOnly, "", 2, []string{kubePortsError}},
		{"several", "[sandbox]\nimage = \"busybox\"\nuser = \"dev\"\nnetwork = \"host\"\n", "", 2, []string{
			"sandbox.toml:3: sandbox.user: \"dev\" is not numeric: the kubernetes backend runs the container as a uid",
			"sandbox.toml:4: sandbox.network: \"host\" cannot be used on the kubernetes backend",
		}},
		{"privileged", "[sandbox]\nimage = \"busybox\"\nprivileged = true\n", "", 2, []string{
			"sandbox.toml:3: sandbox.privileged: a privileged Pod is refused on the kubernetes backend unless config.toml allows it",
		}},
		{"privileged when allowed", "[sandbox]\nimage = \"busybox\"\nprivileged = true\n", "[kubernetes]\nallow_privileged = true\n", 0, []string{
			"warning: sandbox.privileged = true",
		}},
		{"tools warn", "tools = [\"git\"]\n[sandbox]\nimage = \"busybox\"\n", "", 0, []string{
			"warning: tools.git: skipped on the kubernetes backend: the cluster's nodes do not have this host's files",
		}},
	}
	for _, c := range cases {
		for _, cmd := range [][]string{{"validate"}, {"config"}, {"config", "--json"}} {
			t.Run(c.name+"/"+strings.Join(cmd, " "), func(t *testing.T) {
				t.Parallel()
				dir := project(t, c.manifest)
				r := airlock(t, userHome(t, c.config, kube), append([]string{"--file", filepath.Join(dir, "sandbox.toml")}, cmd...)...)
				if r.code != c.code {
					t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, c.code, r.stderr)
				}
				for _, w := range c.stderr {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
					}
				}
				if c.code == 2 {
					for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
						if !strings.HasPrefix(l, "config error: ") {
							t.Errorf("stderr line %q does not start with \"config error: \"", l)
						}
					}
					if r.stdout != "" {
						t.Errorf("stdout %q: nothing is printed for a refused manifest", r.stdout)
					}
				}
				if c.code == 0 && cmd[0] == "validate" && !strings.Contains(r.stdout, "valid for the kubernetes backend") {
					t.Errorf("stdout %q", r.stdout)
				}
				if c.code == 0 && cmd[0] == "config" && !strings.Contains(r.stdout, "busybox") {
					t.Errorf("config printed %q", r.stdout)
				}
			})
		}
	}
}

// TestBackendDockerIgnoresKubernetesRules: on the Docker backend the same
// manifest is valid, with no backend warnings.
func TestBackendDockerIgnoresKubernetesRules(t *testing.T) {
	t.Parallel()
	dir := project(t, "tools = [\"git\"]\n[sandbox]\nimage = \"busybox\"\nuser = \"dev\"\nnetwork = \"host\"\nproject = \"bind\"\n[mounts.a]\nsource = \"/a\"\ntarget = \"/a\"\n")
	r := airlock(t, userHome(t, "", nil), "--file", dir, "validate")
	if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, ": valid (") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// The --backend flag is documented in the root help.
func TestBackendFlagInHelp(t *testing.T) {
	t.Parallel()
	r := airlock(t, nil, "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "--backend") || !strings.Contains(r.stdout, backendEnv) {
		t.Fatalf("exit %d, help:\n%s", r.code, r.stdout)
	}
}
