package manifest_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

// What a manifest cannot mean on the kubernetes backend (a sandbox is a Pod on
// a cluster node): config errors naming the key and the backend, and warnings
// for what is skipped. The Docker backend takes every valid manifest.

var (
	kube           = manifest.Backend{Name: manifest.BackendKubernetes}
	kubePrivileged = manifest.Backend{Name: manifest.BackendKubernetes, AllowPrivileged: true}
)

func TestCheckBackend(t *testing.T) {
	const svc = img + "[services.db]\nimage = \"postgres:16\"\n" // [services.db] at line 3
	tests := []struct {
		name    string
		toml    string
		local   string            // sandbox.local.toml, when not ""
		env     map[string]string // the host environment
		backend manifest.Backend  // the zero value is kube
		want    []string          // error lines (each must be a whole line); nil = no error
		warn    []string          // warnings, exactly
	}{
		// host mounts
		{name: "host mount", toml: img + "[mounts.cfg]\nsource = \"~/.config/tool\"\ntarget = \"/cfg\"\n",
			want: []string{`sandbox.toml:4: mounts.cfg.source: a host path cannot be mounted on the kubernetes backend (the cluster's nodes do not have this host's files); copy it in with [copies.cfg] instead, or set missing = "ignore" to skip the mount on this backend`}},
		{name: "host mount that may be missing is skipped", toml: img + "[mounts.cfg]\nsource = \"~/.config/tool\"\ntarget = \"/cfg\"\nmissing = \"ignore\"\n",
			warn: []string{`mounts.cfg: skipped on the kubernetes backend: the cluster's nodes do not have this host's files (missing = "ignore")`}},
		{name: "copies are fine", toml: img + "[copies.cfg]\nsource = \"~/.config/tool\"\ntarget = \"/cfg\"\n"},

		// sandbox.ports
		{name: "ports", toml: img + "ports = [\"8080:80\"]\n",
			want: []string{`sandbox.toml:3: sandbox.ports: cannot publish ports on the kubernetes backend (the Pod runs on a cluster node, not on this host); leave sandbox.ports empty for this backend and reach a port with kubectl port-forward`}},
		{name: "no ports", toml: img + "ports = []\n"},

		// sandbox.privileged
		{name: "privileged", toml: img + "privileged = true\n",
			want: []string{`sandbox.toml:3: sandbox.privileged: a privileged Pod is refused on the kubernetes backend unless config.toml allows it; set allow_privileged = true under [kubernetes] in config.toml (when the cluster admits privileged Pods), or drop sandbox.privileged and add only the capabilities needed with sandbox.cap_add`}},
		{name: "privileged when allowed", toml: img + "privileged = true\n", backend: kubePrivileged},
		{name: "not privileged", toml: img + "privileged = false\ncap_add = [\"NET_ADMIN\"]\n"},
		{name: "privileged from a preset", toml: "presets = [\"docker\"]\n" + img,
			want: []string{`preset docker:9: sandbox.privileged: a privileged Pod is refused on the kubernetes backend unless config.toml allows it; set allow_privileged = true under [kubernetes] in config.toml (when the cluster admits privileged Pods), or drop sandbox.privileged and add only the capabilities needed with sandbox.cap_add`}},

		// sandbox.network
		{name: "host network", toml: img + "network = \"host\"\n",
			want: []string{`sandbox.toml:3: sandbox.network: "host" cannot be used on the kubernetes backend (it would be a cluster node's network, not this host's); use "bridge" (the Pod's own network) or "none"`}},
		{name: "no network", toml: img + "network = \"none\"\n"},
		{name: "bridge network", toml: img + "network = \"bridge\"\n"},

		// [sandbox.egress]
		{name: "egress", toml: img + "[sandbox.egress]\nallow = [\"example.org\"]\n",
			want: []string{`sandbox.toml:3: sandbox.egress: is not supported on the kubernetes backend yet (airlock has no egress proxy for a Pod); remove [sandbox.egress] for this backend (in sandbox.local.toml, say) and restrict the Pod's egress with the cluster's NetworkPolicy`}},

		// [sandbox.build]
		{name: "build", toml: "[sandbox.build]\ncontext = \".\"\n",
			want: []string{`sandbox.toml:1: sandbox.build: cannot build an image on the kubernetes backend (a cluster has no builder airlock can use); build the image, push it to a registry the cluster pulls from, and set sandbox.image to it`}},
		{name: "build from a local layer", toml: img, local: "[sandbox.build]\ndockerfile = \"ci.Dockerfile\"\n",
			want: []string{`sandbox.local.toml:1: sandbox.build: cannot build an image on the kubernetes backend (a cluster has no builder airlock can use); build the image, push it to a registry the cluster pulls from, and set sandbox.image to it`}},

		// sandbox.user
		{name: "user name", toml: img + "user = \"dev\"\n",
			want: []string{`sandbox.toml:3: sandbox.user: "dev" is not numeric: the kubernetes backend runs the container as a uid (runAsUser), not a name; use "uid" or "uid:gid", e.g. "1000:1000"`}},
		{name: "user uid and group name", toml: img + "user = \"1000:staff\"\n",
			want: []string{`sandbox.toml:3: sandbox.user: "1000:staff" is not numeric: the kubernetes backend runs the container as a uid (runAsUser), not a name; use "uid" or "uid:gid", e.g. "1000:1000"`}},
		{name: "user uid", toml: img + "user = \"1000\"\n"},
		{name: "user uid:gid", toml: img + "user = \"0:0\"\n"},
		{name: "user image default", toml: img},
		{name: "daemon user names are the supervisor's", toml: img + "[daemons.pg]\ncommand = [\"postgres\"]\nuser = \"postgres\"\n"},
		{name: "user host", toml: img + "user = \"host\"\n",
			want: []string{`sandbox.toml:3: sandbox.user: "host" cannot be used on the kubernetes backend: it gives the sandbox this host's uid so that files written into the project and host caches stay yours, but a Pod has neither (the project is copied in, host mounts are refused), and airlock cannot add the account to the image before the Pod starts; use a numeric "uid:gid", e.g. "1000:1000"`}},
		// A daemon of another user beside a non-root sandbox.user: the Pod
		// runs as root, which the restricted Pod Security level refuses.
		{name: "root step beside a non-root sandbox user", toml: img + "user = \"1000:1000\"\n[daemons.setup]\ncommand = [\"setup\"]\noneshot = true\nuser = \"root\"\n[daemons.same]\ncommand = [\"x\"]\nuser = \"1000:01000\"\n[daemons.plain]\ncommand = [\"x\"]\n[daemons.uid]\ncommand = [\"x\"]\nuser = \"1000\"\n",
			warn: []string{
				`daemons.setup.user: names another user than sandbox.user "1000:1000", so the Pod's main container runs as root (runAsUser 0) and its PID 1 starts the main command, exec and the shell as sandbox.user: a namespace that enforces the restricted Pod Security level (runAsNonRoot) refuses such a Pod; leave this daemon's user empty (the sandbox user) to keep the container non-root`,
				`daemons.uid.user: names another user than sandbox.user "1000:1000", so the Pod's main container runs as root (runAsUser 0) and its PID 1 starts the main command, exec and the shell as sandbox.user: a namespace that enforces the restricted Pod Security level (runAsNonRoot) refuses such a Pod; leave this daemon's user empty (the sandbox user) to keep the container non-root`,
			}},
		{name: "daemon users beside a root sandbox user", toml: img + "user = \"0\"\n[daemons.pg]\ncommand = [\"postgres\"]\nuser = \"postgres\"\n"},

		// sandbox.project
		{name: "project bind", toml: img + "project = \"bind\"\n",
			want: []string{`sandbox.toml:3: sandbox.project: "bind" cannot be used on the kubernetes backend (the cluster's nodes do not have this host's files); use "auto" or "copy": the project is copied into the Pod`}},
		{name: "project copy", toml: img + "project = \"copy\"\n"},

		// services with substituted env
		{name: "service with a substituted value and no command", toml: svc + "env = { POSTGRES_PASSWORD = \"${PGPASS}\", POSTGRES_DB = \"app\" }\n",
			env:  map[string]string{"PGPASS": "s3cret"},
			want: []string{`sandbox.toml:3: services.db.command: is required on the kubernetes backend when the service's env takes ${VAR} values (POSTGRES_PASSWORD): airlock starts such a service through a wrapper, which must be given its command (on a cluster airlock cannot read the image's entrypoint and command); set services.db.command`}},
		{name: "service with a substituted value and a command", toml: svc + "command = [\"postgres\"]\nenv = { POSTGRES_PASSWORD = \"${PGPASS}\" }\n",
			env: map[string]string{"PGPASS": "s3cret"}},
		{name: "service with literal env and no command", toml: svc + "env = { POSTGRES_PASSWORD = \"literal\" }\n"},

		// builtin tools bind host files: skipped with a warning
		{name: "tools", toml: "tools = [\"git\", \"go-cache\"]\n" + img,
			warn: []string{"tools.git: skipped on the kubernetes backend: the cluster's nodes do not have this host's files", "tools.go: skipped on the kubernetes backend: the cluster's nodes do not have this host's files"}},
		{name: "tools from a preset", toml: "presets = [\"python\"]\n" + img,
			warn: []string{"tools.uv: skipped on the kubernetes backend: the cluster's nodes do not have this host's files"}},

		// every problem at once, in file order
		{name: "all at once", toml: "tools = [\"npm\"]\n[sandbox]\nimage = \"x\"\nuser = \"dev\"\nports = [\"80\"]\nprivileged = true\n[mounts.a]\nsource = \"/a\"\ntarget = \"/a\"\n",
			want: []string{
				`sandbox.toml:4: sandbox.user: "dev" is not numeric: the kubernetes backend runs the container as a uid (runAsUser), not a name; use "uid" or "uid:gid", e.g. "1000:1000"`,
				`sandbox.toml:5: sandbox.ports: cannot publish ports on the kubernetes backend (the Pod runs on a cluster node, not on this host); leave sandbox.ports empty for this backend and reach a port with kubectl port-forward`,
				`sandbox.toml:6: sandbox.privileged: a privileged Pod is refused on the kubernetes backend unless config.toml allows it; set allow_privileged = true under [kubernetes] in config.toml (when the cluster admits privileged Pods), or drop sandbox.privileged and add only the capabilities needed with sandbox.cap_add`,
				`sandbox.toml:8: mounts.a.source: a host path cannot be mounted on the kubernetes backend (the cluster's nodes do not have this host's files); copy it in with [copies.a] instead, or set missing = "ignore" to skip the mount on this backend`,
			},
			warn: []string{"tools.npm: skipped on the kubernetes backend: the cluster's nodes do not have this host's files"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"sandbox.toml": tc.toml}
			if tc.local != "" {
				files["sandbox.local.toml"] = tc.local
			}
			p := newProject(t, files)
			for k, v := range tc.env {
				p.env[k] = v
			}
			r := p.mustLoad()

			// Docker: nothing to say about any of these.
			for _, docker := range []manifest.Backend{{}, {Name: manifest.BackendDocker}} {
				if warns, err := manifest.CheckBackend(r, docker); err != nil || warns != nil {
					t.Fatalf("backend %q: warnings %q, error:\n%v", docker.Name, warns, err)
				}
			}

			b := tc.backend
			if b.Name == "" {
				b = kube
			}
			warns, err := manifest.CheckBackend(r, b)
			if !slices.Equal(warns, tc.warn) {
				t.Errorf("warnings:\n\t%s\nwant:\n\t%s", strings.Join(warns, "\n\t"), strings.Join(tc.warn, "\n\t"))
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error:\n%v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want:\n\t%s", strings.Join(tc.want, "\n\t"))
			}
			if !manifest.IsConfigError(err) {
				t.Fatalf("%T is not a config error: %v", err, err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Errorf("%d errors, want %d:\n\t%s", len(lines), len(tc.want), strings.Join(lines, "\n\t"))
			}
			wantLines(t, err.Error(), tc.want...)
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows a substituted value:\n%v", err)
			}
		})
	}
}

// TestCheckBackendRestored: the control daemon checks a manifest a client sent
// (manifest.Restore), which has no files and lines: the errors still name the
// key and the backend.
func TestCheckBackendRestored(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": img + "network = \"host\"\n"})
	restored := manifest.Restore(r.Manifest, r.File, r.ProjectDir, r.Sources, nil)
	_, err := manifest.CheckBackend(restored, kube)
	want := `sandbox.network: "host" cannot be used on the kubernetes backend (it would be a cluster node's network, not this host's); use "bridge" (the Pod's own network) or "none"`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestCheckBackendUnknown(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": img})
	_, err := manifest.CheckBackend(r, manifest.Backend{Name: "k8s"})
	if err == nil || manifest.IsConfigError(err) || !strings.Contains(err.Error(), `"k8s"`) {
		t.Fatalf("got %v, want a plain error naming the backend", err)
	}
}

// TestExamplesRunOnKubernetes: the project's example manifests are meant to
// run unchanged on both backends.
func TestExamplesRunOnKubernetes(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "examples", "*", manifest.FileName))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range dirs {
		t.Run(filepath.Base(filepath.Dir(f)), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			r := load(t, map[string]string{"sandbox.toml": string(src)})
			if warns, err := manifest.CheckBackend(r, kube); err != nil || len(warns) > 0 {
				t.Fatalf("warnings %q, error:\n%v", warns, err)
			}
		})
	}
}
