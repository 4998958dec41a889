package userconfig

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The backend choice ([runtime] backend) and the kubernetes backend's settings
// ([kubernetes]) of config.toml.

func TestBackendDefaults(t *testing.T) {
	t.Parallel()
	want := Kubernetes{Namespace: "airlock", Image: "", AllowPrivileged: false, Context: "", CreateNamespace: true}
	c, err := Load(filepath.Join(t.TempDir(), "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Runtime.Backend != "docker" || !reflect.DeepEqual(c.Kubernetes, want) {
		t.Fatalf("missing file: backend %q, kubernetes %+v", c.Runtime.Backend, c.Kubernetes)
	}
	// A file that sets neither table keeps the defaults too.
	c, err = Parse("config.toml", []byte("[runtime]\nidle_ttl = \"1h\"\n[kubernetes]\n"), "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	if c.Runtime.Backend != "docker" || !reflect.DeepEqual(c.Kubernetes, want) {
		t.Fatalf("empty [kubernetes]: backend %q, kubernetes %+v", c.Runtime.Backend, c.Kubernetes)
	}
}

func TestBackendSettings(t *testing.T) {
	t.Parallel()
	src := `[runtime]
backend = "kubernetes"

[kubernetes]
namespace = "ci-sandboxes"
image = "registry.example.com/tools/airlock:1.2.0"
allow_privileged = true
context = "kind-kind"
create_namespace = false
`
	c, err := Parse("config.toml", []byte(src), "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	want := Kubernetes{Namespace: "ci-sandboxes", Image: "registry.example.com/tools/airlock:1.2.0", AllowPrivileged: true, Context: "kind-kind", CreateNamespace: false}
	if c.Runtime.Backend != "kubernetes" || !reflect.DeepEqual(c.Kubernetes, want) {
		t.Fatalf("backend %q, kubernetes %+v; want %+v", c.Runtime.Backend, c.Kubernetes, want)
	}
}

// TestBackendValues: each key, a value it takes and one it refuses with an
// error naming the file, the line and the key.
func TestBackendValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src string
		want      string // "" = valid
		check     func(*Config) bool
	}{
		{"backend docker", "[runtime]\nbackend = \"docker\"\n", "", func(c *Config) bool { return c.Runtime.Backend == BackendDocker }},
		{"backend kubernetes", "[runtime]\nbackend = \"kubernetes\"\n", "", func(c *Config) bool { return c.Runtime.Backend == BackendKubernetes }},
		{"backend unknown", "[runtime]\nbackend = \"k8s\"\n",
			`config.toml:2: runtime.backend: unknown backend "k8s" (want docker or kubernetes)`, nil},
		{"backend empty", "[runtime]\nbackend = \"\"\n", `config.toml:2: runtime.backend: unknown backend ""`, nil},
		{"backend case", "[runtime]\nbackend = \"Docker\"\n", `runtime.backend: unknown backend "Docker"`, nil},
		{"backend wrong type", "[runtime]\nbackend = 1\n", "config.toml:2: runtime.backend: wrong type: expected a string, got an integer", nil},

		{"namespace", "[kubernetes]\nnamespace = \"team-a-1\"\n", "", func(c *Config) bool { return c.Kubernetes.Namespace == "team-a-1" }},
		{"namespace upper case", "[kubernetes]\nnamespace = \"Team\"\n",
			`config.toml:2: kubernetes.namespace: invalid namespace "Team" (a Kubernetes namespace is at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit)`, nil},
		{"namespace dot", "[kubernetes]\nnamespace = \"a.b\"\n", `kubernetes.namespace: invalid namespace "a.b"`, nil},
		{"namespace trailing dash", "[kubernetes]\nnamespace = \"ab-\"\n", `kubernetes.namespace: invalid namespace "ab-"`, nil},
		{"namespace too long", "[kubernetes]\nnamespace = \"" + strings.Repeat("a", 64) + "\"\n", `kubernetes.namespace: invalid namespace`, nil},
		{"namespace 63", "[kubernetes]\nnamespace = \"" + strings.Repeat("a", 63) + "\"\n", "", func(c *Config) bool { return len(c.Kubernetes.Namespace) == 63 }},
		{"namespace empty", "[kubernetes]\nnamespace = \"\"\n", `config.toml:2: kubernetes.namespace: must not be empty (the default is "airlock")`, nil},

		{"image", "[kubernetes]\nimage = \"localhost/airlock:abc\"\n", "", func(c *Config) bool { return c.Kubernetes.Image == "localhost/airlock:abc" }},
		{"image digest", "[kubernetes]\nimage = \"registry.example.com/o/airlock@sha256:" + strings.Repeat("ab", 32) + "\"\n", "", func(c *Config) bool { return strings.HasPrefix(c.Kubernetes.Image, "registry.example.com/") }},
		{"image empty is the build's", "[kubernetes]\nimage = \"\"\n", "", func(c *Config) bool { return c.Kubernetes.Image == "" }},
		{"image invalid", "[kubernetes]\nimage = \"Registry/Airlock:1\"\n", `config.toml:2: kubernetes.image: invalid image reference "Registry/Airlock:1"`, nil},
		{"image with space", "[kubernetes]\nimage = \"airlock latest\"\n", `kubernetes.image: invalid image reference "airlock latest"`, nil},

		{"context", "[kubernetes]\ncontext = \"admin@prod/eu\"\n", "", func(c *Config) bool { return c.Kubernetes.Context == "admin@prod/eu" }},
		{"context line break", "[kubernetes]\ncontext = \"a\\nb\"\n", `config.toml:2: kubernetes.context: invalid context name "a\nb"`, nil},

		{"allow_privileged", "[kubernetes]\nallow_privileged = true\n", "", func(c *Config) bool { return c.Kubernetes.AllowPrivileged }},
		{"allow_privileged string", "[kubernetes]\nallow_privileged = \"yes\"\n", "config.toml:2: kubernetes.allow_privileged: wrong type: expected a boolean, got a string", nil},
		{"create_namespace", "[kubernetes]\ncreate_namespace = false\n", "", func(c *Config) bool { return !c.Kubernetes.CreateNamespace }},
		{"create_namespace int", "[kubernetes]\ncreate_namespace = 0\n", "config.toml:2: kubernetes.create_namespace: wrong type: expected a boolean, got an integer", nil},

		{"unknown kubernetes key", "[kubernetes]\nnamespace = \"a\"\nkubeconfig = \"/x\"\n", "config.toml:3: kubernetes.kubeconfig: unknown key", nil},
		{"kubernetes not a table", "kubernetes = true\n", "config.toml:1: kubernetes: wrong type", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse("config.toml", []byte(c.src), "/home/u")
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !c.check(cfg) {
					t.Fatalf("not applied: backend %q, kubernetes %+v", cfg.Runtime.Backend, cfg.Kubernetes)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if !IsConfigError(err) {
				t.Fatalf("%v is not a config error", err)
			}
		})
	}
}

func TestCheckBackend(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"docker", "kubernetes"} {
		if err := CheckBackend(ok); err != nil {
			t.Errorf("CheckBackend(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "k8s", "DOCKER", "podman"} {
		err := CheckBackend(bad)
		if err == nil || !strings.Contains(err.Error(), `"`+bad+`"`) || !strings.Contains(err.Error(), "docker or kubernetes") {
			t.Errorf("CheckBackend(%q) = %v, want an error naming it and the choices", bad, err)
		}
	}
}
