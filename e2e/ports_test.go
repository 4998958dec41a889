package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/test/testenv"
)

// sandbox.ports (published for up and run, 127.0.0.1 unless an IP is given, shown
// by ps) and sandbox.cap_add / cap_drop (a capability present inside without
// privileged).

// psPort is one entry of `ports` in `airlock ps --json`.
type psPort struct {
	HostIP        string `json:"host_ip"`
	HostPort      int    `json:"host_port"`
	ContainerPort int    `json:"container_port"`
	Protocol      string `json:"protocol"`
}

// psPorts returns the ports `ps --json` lists for sandbox id.
func (e *env) psPorts(id string) []psPort {
	e.T.Helper()
	r := e.MustRun("ps", "--json")
	var all []struct {
		ID    string   `json:"id"`
		Ports []psPort `json:"ports"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &all); err != nil {
		e.T.Fatalf("ps --json: %v\n%s", err, r)
	}
	for _, s := range all {
		if s.ID == id {
			return s.Ports
		}
	}
	e.T.Fatalf("ps --json does not list %s:\n%s", id, r.Stdout)
	return nil
}

const portsManifest = `
[sandbox]
image = "{{image}}"
ports = ["127.0.0.1:%d:8080", "9090"]

[daemons.web]
command = ["sh", "-c", "mkdir -p /tmp/www && echo hello-from-the-sandbox > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"]
ready = { tcp = "127.0.0.1:8080", timeout = "20s" }
timeout = 1
`

// TestPortsPublished: `up -d` with a web server in a daemon is reachable from the
// host on the port sandbox.ports names, ps shows the port (a random host port
// too), ps --json has it, and down leaves nothing.
func TestPortsPublished(t *testing.T) {
	limit(t)
	port := testenv.FreePort(t)
	e := newEnv(t, fmt.Sprintf(portsManifest, port))

	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		t.Fatalf("GET from the host: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "hello-from-the-sandbox\n" {
		t.Errorf("GET http://127.0.0.1:%d/ = %d %q, want 200 %q", port, resp.StatusCode, body, "hello-from-the-sandbox\n")
	}

	ports := e.psPorts(id)
	var random psPort
	fixed := false
	for _, p := range ports {
		switch {
		case p == psPort{HostIP: "127.0.0.1", HostPort: port, ContainerPort: 8080, Protocol: "tcp"}:
			fixed = true
		case p.ContainerPort == 9090:
			random = p
		}
	}
	if !fixed || len(ports) != 2 {
		t.Errorf("ps --json ports = %+v, want 127.0.0.1:%d->8080/tcp and a host port for 9090", ports, port)
	}
	// "9090" alone: a free host port on 127.0.0.1, picked by the Engine.
	if random.HostIP != "127.0.0.1" || random.HostPort == 0 || random.Protocol != "tcp" {
		t.Errorf("the port of \"9090\" = %+v, want 127.0.0.1:<a free port>->9090/tcp", random)
	}
	r := e.MustRun("ps")
	contains(t, "ps", r.Stdout, "PORTS", fmt.Sprintf("127.0.0.1:%d->8080/tcp", port), fmt.Sprintf("127.0.0.1:%d->9090/tcp", random.HostPort))

	e.MustRun("down")
	if _, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/", port)); err == nil {
		t.Errorf("port %d still answers after down", port)
	}
	e.assertClean()
}

// TestPortAlreadyInUse: a host port already in use fails up -d and run with exit 125,
// naming the port, and leaves nothing behind.
func TestPortAlreadyInUse(t *testing.T) {
	limit(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	e := newEnv(t, fmt.Sprintf("[sandbox]\nimage = \"{{image}}\"\nports = [\"%d:8080\"]\n", port))
	addr := "127.0.0.1:" + strconv.Itoa(port)

	r := e.Run("up", "-d")
	if r.Code != 125 {
		t.Errorf("up -d with host port %d in use: want exit 125, got %s", port, r)
	}
	contains(t, "stderr of up -d", r.Stderr, addr, "already in use", fmt.Sprintf(`"%d:8080"`, port))
	e.assertClean()
	if ps := e.PS(); len(ps) != 0 {
		t.Errorf("after a failed up -d, ps -a lists %+v", ps)
	}

	r = e.Run("run", "--", "true")
	if r.Code != 125 {
		t.Errorf("run with host port %d in use: want exit 125, got %s", port, r)
	}
	contains(t, "stderr of run", r.Stderr, addr, "already in use")
	e.assertClean()
}

// capEff returns the effective capability set of the main command of a run.
func capEff(t *testing.T, e *env) uint64 {
	t.Helper()
	return parseCapEff(t, e.MustRun("run", "--", "sh", "-c", "grep CapEff /proc/self/status").Stdout)
}

// parseCapEff reads the value of the first line of out, grep CapEff's.
func parseCapEff(t *testing.T, out string) uint64 {
	t.Helper()
	line, _, _ := strings.Cut(out, "\n")
	f := strings.Fields(line)
	if len(f) != 2 {
		t.Fatalf("CapEff line: %q", out)
	}
	v, err := strconv.ParseUint(f[1], 16, 64)
	if err != nil {
		t.Fatalf("CapEff %q: %v", f[1], err)
	}
	return v
}

// TestCapabilities: cap_add gives a capability (NET_ADMIN, bit 12) to the main
// command, which it lacks by default; cap_drop takes one (CHOWN, bit 0) away.
func TestCapabilities(t *testing.T) {
	limit(t)
	const netAdmin, chown = 1 << 12, 1 << 0
	e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n")
	if c := capEff(t, e); c&netAdmin != 0 || c&chown == 0 {
		t.Errorf("CapEff by default = %#x, want NET_ADMIN unset and CHOWN set", c)
	}
	e.WriteManifest("[sandbox]\nimage = \"{{image}}\"\ncap_add = [\"net_admin\"]\ncap_drop = [\"CAP_CHOWN\"]\n")
	// The same sandbox also does what NET_ADMIN is for: changing the network
	// (the loopback's MTU).
	r := e.Run("run", "--", "sh", "-c", "grep CapEff /proc/self/status; ip link set lo mtu 1500 && echo mtu-set")
	if c := parseCapEff(t, r.Stdout); c&netAdmin == 0 || c&chown != 0 {
		t.Errorf("CapEff with cap_add = [net_admin], cap_drop = [CAP_CHOWN] = %#x, want NET_ADMIN set and CHOWN unset", c)
	}
	if r.Code != 0 || !strings.Contains(r.Stdout, "mtu-set") {
		t.Errorf("ip link set with NET_ADMIN: %s", r)
	}
	e.assertClean()
}

// TestPortsAndCapabilitiesConfigErrors: an unknown capability and ports on a
// sandbox without a network are config errors (exit 2) naming the key, before
// anything exists; SYS_ADMIN is warned about as privileged is.
func TestPortsAndCapabilitiesConfigErrors(t *testing.T) {
	limit(t)
	e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\ncap_add = [\"NET_ADMIN\", \"FLY\"]\n")
	r := e.Run("validate")
	if r.Code != 2 {
		t.Errorf("validate with an unknown capability: want exit 2, got %s", r)
	}
	contains(t, "stderr of validate", r.Stderr, "config error: sandbox.toml:3: sandbox.cap_add: unknown capability \"FLY\"")

	e.WriteManifest("[sandbox]\nimage = \"{{image}}\"\nnetwork = \"none\"\nports = [\"8080\"]\n")
	for _, args := range [][]string{{"validate"}, {"run", "--", "true"}, {"up", "-d"}} {
		r = e.Run(args...)
		if r.Code != 2 {
			t.Errorf("%s with ports and network = none: want exit 2, got %s", args, r)
		}
		contains(t, "stderr of "+strings.Join(args, " "), r.Stderr, `sandbox.ports: cannot publish ports with sandbox.network = "none"`)
	}

	e.WriteManifest("[sandbox]\nimage = \"{{image}}\"\ncap_add = [\"sys_admin\"]\n")
	r = e.MustRun("config")
	contains(t, "stderr of config", r.Stderr, "warning: sandbox.cap_add has SYS_ADMIN")
	contains(t, "config", r.Stdout, "cap_add = [\"sys_admin\"]")
	e.assertClean()
}
