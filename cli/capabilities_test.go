package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/client"
)

// `airlock config` (and validate, up, run) warn about SYS_ADMIN and ALL in
// sandbox.cap_add as about privileged; other capabilities pass without a word.
func TestConfigWarnsAboutSysAdmin(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		capAdd string
		warn   []string
	}{
		{`["sys_admin", "CAP_SYS_ADMIN"]`, []string{"warning: sandbox.cap_add has SYS_ADMIN: root in the sandbox comes close to sandbox.privileged"}},
		{`["all"]`, []string{"warning: sandbox.cap_add has ALL:"}},
		{`["NET_ADMIN", "SYS_PTRACE"]`, nil},
	} {
		dir := project(t, "[sandbox]\nimage = \"x\"\ncap_add = "+tt.capAdd+"\n")
		for _, cmd := range []string{"config", "validate"} {
			r := airlock(t, nil, "--file", dir, cmd)
			if r.code != 0 {
				t.Errorf("%s with cap_add = %s: exit %d, stderr %q", cmd, tt.capAdd, r.code, r.stderr)
			}
			if n := strings.Count(r.stderr, "warning:"); n != len(tt.warn) {
				t.Errorf("%s with cap_add = %s: %d warnings, want %d:\n%s", cmd, tt.capAdd, n, len(tt.warn), r.stderr)
			}
			for _, w := range tt.warn {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("%s with cap_add = %s: stderr lacks %q:\n%s", cmd, tt.capAdd, w, r.stderr)
				}
			}
		}
	}
	r := airlock(t, nil, "--file", project(t, "[sandbox]\nimage = \"x\"\ncap_drop = [\"FLY\"]\n"), "validate")
	if r.code != ExitUsage || !strings.HasPrefix(r.stderr, "config error: ") || !strings.Contains(r.stderr, "sandbox.toml:3: sandbox.cap_drop: unknown capability \"FLY\"") {
		t.Errorf("validate with an unknown capability: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestPortList(t *testing.T) {
	got := portList([]client.Port{
		{HostIP: "127.0.0.1", HostPort: 18080, ContainerPort: 8080, Protocol: "tcp"},
		{HostIP: "::1", HostPort: 53, ContainerPort: 53, Protocol: "udp"},
	})
	if want := "127.0.0.1:18080->8080/tcp, [::1]:53->53/udp"; got != want {
		t.Errorf("portList = %q, want %q", got, want)
	}
	if got := portList(nil); got != "" {
		t.Errorf("portList(nil) = %q", got)
	}
}

// Services (from [services.*] or a compose file) and host binds are warned
// about as the primary's privileges are: a service's SYS_ADMIN or ALL, a bind
// of the host's / or of the Docker Engine's socket, by the sandbox or a service.
func TestConfigWarnsAboutServicesAndHostBinds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, manifest, compose string
		warn                    []string
	}{
		{"service cap_add", "[services.db]\nimage = \"x\"\ncap_add = [\"sys_admin\"]\n", "",
			[]string{"warning: services.db.cap_add has SYS_ADMIN: root in the service comes close to a privileged container"}},
		{"service bind of /", "[services.db]\nimage = \"x\"\nvolumes = [\"/:/host:ro\"]\n", "",
			[]string{"warning: services.db.volumes (\"/:/host:ro\") binds the host's / into service db"}},
		{"service bind of the socket", "[services.db]\nimage = \"x\"\nvolumes = [\"/var/run/docker.sock:/var/run/docker.sock\"]\n", "",
			[]string{"warning: services.db.volumes (\"/var/run/docker.sock:/var/run/docker.sock\") binds the Docker Engine's socket /var/run/docker.sock"}},
		{"sandbox bind of /", "[mounts.root]\nsource = \"/\"\ntarget = \"/host\"\n", "",
			[]string{"warning: mounts.root.source binds the host's / into the sandbox"}},
		{"sandbox bind of the socket's folder", "[mounts.run]\nsource = \"/var/run\"\ntarget = \"/host-run\"\n", "",
			[]string{"warning: mounts.run.source binds /var/run, which holds the Docker Engine's socket"}},
		{"compose", "[compose]\nfile = \"compose.yaml\"\n",
			"services:\n  db:\n    image: x\n    cap_add: [ALL]\n    volumes: [\"/:/host\", \"/run/docker.sock:/s\"]\n",
			[]string{"warning: services.db.cap_add has ALL:", "warning: services.db.volumes (\"/:/host\") binds the host's /", "warning: services.db.volumes (\"/run/docker.sock:/s\") binds the Docker Engine's socket /run/docker.sock"}},
		{"harmless", "[services.db]\nimage = \"x\"\ncap_add = [\"NET_ADMIN\"]\nvolumes = [\"./data:/data\"]\n", "", nil},
	} {
		dir := project(t, "[sandbox]\nimage = \"x\"\n"+tt.manifest)
		if tt.compose != "" {
			writeFile(t, filepath.Join(dir, "compose.yaml"), tt.compose)
		}
		_ = os.MkdirAll(filepath.Join(dir, "data"), 0o755)
		for _, cmd := range []string{"config", "validate"} {
			r := airlock(t, nil, "--file", dir, cmd)
			if r.code != 0 {
				t.Errorf("%s, %s: exit %d, stderr %q", tt.name, cmd, r.code, r.stderr)
			}
			if n := strings.Count(r.stderr, "warning:"); n != len(tt.warn) {
				t.Errorf("%s, %s: %d warnings, want %d:\n%s", tt.name, cmd, n, len(tt.warn), r.stderr)
			}
			for _, w := range tt.warn {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("%s, %s: stderr lacks %q:\n%s", tt.name, cmd, w, r.stderr)
				}
			}
		}
	}
}
