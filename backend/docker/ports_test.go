package docker

import (
	"errors"
	"reflect"
	"testing"

	"github.com/docker/go-connections/nat"

	"github.com/airlock-dev/airlock/backend"
)

// Unit tests (no Engine): sandbox.ports and the capabilities reach the primary
// container's configuration, the ports the Engine bound are read back in order,
// and the Engine's errors about a taken host port name the port and its entry.

func TestPrimaryConfigPortsAndCapabilities(t *testing.T) {
	r := loadBytes(t, `[sandbox]
image = "x"
ports = ["8080", "127.0.0.1:18080:8080", "0.0.0.0:5432:5432/tcp", "53:53/udp"]
cap_add = ["net_admin", "CAP_SYS_PTRACE", "NET_ADMIN"]
cap_drop = ["mknod"]
`, nil)
	rt := &Runtime{}
	sb := &backend.Sandbox{ID: "abc", Name: "airlock-abc", Network: SharedNetwork}
	cfg, host, _, err := primaryConfig(rt.Remote, sb, &backend.Request{}, r, &hostPlan{}, sandboxUser{Spec: "0:0"}, "x", "vol", map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	wantExposed := nat.PortSet{"8080/tcp": {}, "5432/tcp": {}, "53/udp": {}}
	if !reflect.DeepEqual(cfg.ExposedPorts, wantExposed) {
		t.Errorf("ExposedPorts = %v, want %v", cfg.ExposedPorts, wantExposed)
	}
	wantBindings := nat.PortMap{
		"8080/tcp": {{HostIP: "127.0.0.1"}, {HostIP: "127.0.0.1", HostPort: "18080"}},
		"5432/tcp": {{HostIP: "0.0.0.0", HostPort: "5432"}},
		"53/udp":   {{HostIP: "127.0.0.1", HostPort: "53"}},
	}
	if !reflect.DeepEqual(host.PortBindings, wantBindings) {
		t.Errorf("PortBindings = %v, want %v", host.PortBindings, wantBindings)
	}
	if want := []string{"CAP_NET_ADMIN", "CAP_SYS_PTRACE"}; !reflect.DeepEqual([]string(host.CapAdd), want) {
		t.Errorf("CapAdd = %q, want %q", host.CapAdd, want)
	}
	if want := []string{"CAP_MKNOD"}; !reflect.DeepEqual([]string(host.CapDrop), want) {
		t.Errorf("CapDrop = %q, want %q", host.CapDrop, want)
	}

	// Without them: nothing exposed, published, added or dropped.
	r = loadBytes(t, "[sandbox]\nimage = \"x\"\n", nil)
	cfg, host, _, err = primaryConfig(rt.Remote, sb, &backend.Request{}, r, &hostPlan{}, sandboxUser{Spec: "0:0"}, "x", "vol", map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ExposedPorts != nil || host.PortBindings != nil || host.CapAdd != nil || host.CapDrop != nil {
		t.Errorf("without ports or capabilities: exposed %v, bindings %v, cap_add %q, cap_drop %q", cfg.ExposedPorts, host.PortBindings, host.CapAdd, host.CapDrop)
	}
}

func TestPublishedPorts(t *testing.T) {
	got := publishedPorts(nat.PortMap{
		"9090/tcp": {{HostIP: "127.0.0.1", HostPort: "32771"}},
		"8080/tcp": {{HostIP: "127.0.0.1", HostPort: "18080"}, {HostIP: "::1", HostPort: "18080"}},
		"53/udp":   {{HostIP: "0.0.0.0", HostPort: "53"}},
		"7000/tcp": nil, // exposed, not published
	})
	want := []backend.Port{
		{HostIP: "0.0.0.0", HostPort: 53, ContainerPort: 53, Protocol: "udp"},
		{HostIP: "127.0.0.1", HostPort: 18080, ContainerPort: 8080, Protocol: "tcp"},
		{HostIP: "::1", HostPort: 18080, ContainerPort: 8080, Protocol: "tcp"},
		{HostIP: "127.0.0.1", HostPort: 32771, ContainerPort: 9090, Protocol: "tcp"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("publishedPorts = %+v, want %+v", got, want)
	}
}

func TestPortInUse(t *testing.T) {
	specs := []string{"8080", "127.0.0.1:18080:8080", "0.0.0.0:9000:9000", "[::1]:7000:7000"}
	tests := []struct {
		engine     string // the Engine's error
		addr, spec string
	}{
		// Engine 20.10: a port another container holds, and one another process holds.
		{"Error response from daemon: driver failed programming external connectivity on endpoint airlock-x (abc): Bind for 127.0.0.1:18080 failed: port is already allocated",
			"127.0.0.1:18080", "127.0.0.1:18080:8080"},
		{"Error response from daemon: driver failed programming external connectivity on endpoint airlock-x (abc): Error starting userland proxy: listen tcp4 127.0.0.1:18080: bind: address already in use",
			"127.0.0.1:18080", "127.0.0.1:18080:8080"},
		{"Error starting userland proxy: listen tcp6 [::1]:7000: bind: address already in use",
			"[::1]:7000", "[::1]:7000:7000"},
		// Later Engines.
		{"Error response from daemon: failed to set up container networking: driver failed programming external connectivity on endpoint airlock-x (abc): failed to bind host port for 0.0.0.0:9000:172.17.0.2:9000/tcp: address already in use",
			"0.0.0.0:9000", "0.0.0.0:9000:9000"},
		// Engine 29 (docker-proxy given the socket the Engine bound).
		{"Error response from daemon: failed to set up container networking: driver failed programming external connectivity on endpoint airlock-x (abc): failed to bind host port 127.0.0.1:18080/tcp: address already in use",
			"127.0.0.1:18080", "127.0.0.1:18080:8080"},
		{"failed to bind host port [::1]:7000/tcp: address already in use", "[::1]:7000", "[::1]:7000:7000"},
		// Docker Desktop.
		{"Ports are not available: exposing port TCP 127.0.0.1:18080 -> 0.0.0.0:0: listen tcp 127.0.0.1:18080: bind: address already in use",
			"127.0.0.1:18080", "127.0.0.1:18080:8080"},
		// A port no entry names fixed (a random one raced away), and a message without one.
		{"Bind for 127.0.0.1:32771 failed: port is already allocated", "127.0.0.1:32771", ""},
		{"something: address already in use", "", ""},
	}
	for _, tt := range tests {
		pe := portInUse(errors.New(tt.engine), specs)
		if pe == nil {
			t.Errorf("portInUse(%q) = nil", tt.engine)
			continue
		}
		if pe.Addr != tt.addr || pe.Spec != tt.spec {
			t.Errorf("portInUse(%q) = addr %q, spec %q; want %q, %q", tt.engine, pe.Addr, pe.Spec, tt.addr, tt.spec)
		}
		t.Log(pe.Error())
	}
	if pe := portInUse(errors.New("no such image"), specs); pe != nil {
		t.Errorf("portInUse of another error = %v", pe)
	}
	if pe := portInUse(errors.New("Bind for 127.0.0.1:80 failed: port is already allocated"), nil); pe != nil {
		t.Errorf("portInUse without sandbox.ports = %v", pe)
	}
	err := error(&backend.Error{Code: 125, Err: portInUse(errors.New("Bind for 127.0.0.1:18080 failed: port is already allocated"), specs)})
	want := `cannot start the sandbox: host port 127.0.0.1:18080 of sandbox.ports "127.0.0.1:18080:8080" is already in use (free it or publish another port)`
	var pe *backend.PortInUseError
	if err.Error() != want || !errors.As(err, &pe) {
		t.Errorf("the error reads %q (a PortInUseError: %v), want %q", err, errors.As(err, &pe), want)
	}
}
