package cli

import (
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
