package manifest_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/docker/go-connections/nat"

	"github.com/airlock-dev/airlock/manifest"
)

// sandbox.ports (Docker's syntax, 127.0.0.1 unless an IP is given) and
// sandbox.cap_add / cap_drop (Docker's capability names, validated).

func TestParsePort(t *testing.T) {
	b := func(ip, port string) nat.PortBinding { return nat.PortBinding{HostIP: ip, HostPort: port} }
	tests := []struct {
		spec string
		want []nat.PortMapping
	}{
		{"8080", []nat.PortMapping{{Port: "8080/tcp", Binding: b("127.0.0.1", "")}}},
		{"127.0.0.1:18080:8080", []nat.PortMapping{{Port: "8080/tcp", Binding: b("127.0.0.1", "18080")}}},
		{"5432:5432/tcp", []nat.PortMapping{{Port: "5432/tcp", Binding: b("127.0.0.1", "5432")}}},
		{"0.0.0.0:80:8080", []nat.PortMapping{{Port: "8080/tcp", Binding: b("0.0.0.0", "80")}}},
		{"127.0.0.1::8080", []nat.PortMapping{{Port: "8080/tcp", Binding: b("127.0.0.1", "")}}},
		{"[::1]:8080:80", []nat.PortMapping{{Port: "80/tcp", Binding: b("::1", "8080")}}},
		{"53:53/udp", []nat.PortMapping{{Port: "53/udp", Binding: b("127.0.0.1", "53")}}},
		{"9000:9000/SCTP", []nat.PortMapping{{Port: "9000/sctp", Binding: b("127.0.0.1", "9000")}}},
		{"8000-8001:9000-9001", []nat.PortMapping{
			{Port: "9000/tcp", Binding: b("127.0.0.1", "8000")},
			{Port: "9001/tcp", Binding: b("127.0.0.1", "8001")},
		}},
		{"8000-8010:80", []nat.PortMapping{{Port: "80/tcp", Binding: b("127.0.0.1", "8000-8010")}}},
	}
	for _, tt := range tests {
		got, err := manifest.ParsePort(tt.spec)
		if err != nil {
			t.Errorf("ParsePort(%q): %v", tt.spec, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParsePort(%q) = %+v, want %+v", tt.spec, got, tt.want)
		}
	}
}

func TestParsePortRejects(t *testing.T) {
	for _, spec := range []string{
		"", " 8080", "http", "8080/icmp", "1.2.3:80:80", "example.com:80:80", "70000", "0", "80:0",
		"8000-8001:9000-9002", "9002-9000", "1:2:3:4", "8080:", ":8080:",
	} {
		if ms, err := manifest.ParsePort(spec); err == nil {
			t.Errorf("ParsePort(%q) = %+v, want an error", spec, ms)
		} else if !strings.Contains(err.Error(), `"`+spec+`"`) {
			t.Errorf("ParsePort(%q): the error does not name the entry: %v", spec, err)
		}
	}
}

func TestParsePorts(t *testing.T) {
	exposed, bindings, err := manifest.ParsePorts([]string{"8080", "127.0.0.1:18080:8080", "5432:5432/tcp", "53:53/udp", "127.0.0.1:53:53/tcp"})
	if err != nil {
		t.Fatal(err)
	}
	wantExposed := nat.PortSet{"8080/tcp": {}, "5432/tcp": {}, "53/udp": {}, "53/tcp": {}}
	if !reflect.DeepEqual(exposed, wantExposed) {
		t.Errorf("exposed = %v, want %v", exposed, wantExposed)
	}
	wantBindings := nat.PortMap{
		"8080/tcp": {{HostIP: "127.0.0.1"}, {HostIP: "127.0.0.1", HostPort: "18080"}},
		"5432/tcp": {{HostIP: "127.0.0.1", HostPort: "5432"}},
		"53/udp":   {{HostIP: "127.0.0.1", HostPort: "53"}},
		"53/tcp":   {{HostIP: "127.0.0.1", HostPort: "53"}},
	}
	if !reflect.DeepEqual(bindings, wantBindings) {
		t.Errorf("bindings = %v, want %v", bindings, wantBindings)
	}

	// The same host port twice (on one address, or one of them every address)
	// is refused; random host ports and other addresses are not.
	for _, specs := range [][]string{
		{"8080:80", "127.0.0.1:8080:81"},
		{"0.0.0.0:8080:80", "8080:81"},
		{"8080:80", "[::]:8080:81"},
		{"8000-8002:9000-9002", "8001:81"},
	} {
		if _, _, err := manifest.ParsePorts(specs); err == nil || !strings.Contains(err.Error(), "both bind host port") {
			t.Errorf("ParsePorts(%q): %v, want a conflict", specs, err)
		}
	}
	for _, specs := range [][]string{
		{"8080", "8080"},
		{"127.0.0.1:8080:80", "127.0.0.2:8080:80"},
		{"8080:80", "8080:80/udp"},
		{"127.0.0.1::80", "127.0.0.1::81"},
	} {
		if _, _, err := manifest.ParsePorts(specs); err != nil {
			t.Errorf("ParsePorts(%q): %v", specs, err)
		}
	}
	if _, _, err := manifest.ParsePorts([]string{"1-2000"}); err == nil || !strings.Contains(err.Error(), "more than 1024 ports") {
		t.Errorf("ParsePorts of 2000 ports: %v, want the bound", err)
	}
}

func TestPortSpecFor(t *testing.T) {
	specs := []string{"8080", "127.0.0.1:18080:8080", "0.0.0.0:9000:9000"}
	for _, tt := range []struct{ ip, port, want string }{
		{"127.0.0.1", "18080", "127.0.0.1:18080:8080"},
		{"", "18080", "127.0.0.1:18080:8080"},
		{"127.0.0.1", "9000", "0.0.0.0:9000:9000"},
		{"0.0.0.0", "9000", "0.0.0.0:9000:9000"},
		{"127.0.0.1", "1234", ""},
	} {
		if got := manifest.PortSpecFor(specs, tt.ip, tt.port); got != tt.want {
			t.Errorf("PortSpecFor(%s, %s) = %q, want %q", tt.ip, tt.port, got, tt.want)
		}
	}
}

func TestNormalizeCapability(t *testing.T) {
	for in, want := range map[string]string{
		"NET_ADMIN": "CAP_NET_ADMIN", "net_admin": "CAP_NET_ADMIN", "CAP_SYS_PTRACE": "CAP_SYS_PTRACE",
		"cap_chown": "CAP_CHOWN", "all": "ALL", "ALL": "ALL", "checkpoint_restore": "CAP_CHECKPOINT_RESTORE",
	} {
		if got, err := manifest.NormalizeCapability(in); err != nil || got != want {
			t.Errorf("NormalizeCapability(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "CAP_", "NET_ADMINS", "CAP_ALL", "FLY", "net-admin"} {
		if got, err := manifest.NormalizeCapability(in); err == nil {
			t.Errorf("NormalizeCapability(%q) = %q, want an error", in, got)
		}
	}
	if got := manifest.PowerfulCapabilities(&manifest.Sandbox{CapAdd: []string{"net_admin", "sys_admin", "CAP_SYS_ADMIN", "all"}}); !reflect.DeepEqual(got, []string{"CAP_SYS_ADMIN", "ALL"}) {
		t.Errorf("PowerfulCapabilities = %q", got)
	}
}

func TestPortsAndCapabilitiesLoad(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": img})
	if r.Sandbox.Ports == nil || len(r.Sandbox.Ports) != 0 || r.Sandbox.CapAdd == nil || len(r.Sandbox.CapAdd) != 0 || r.Sandbox.CapDrop == nil || len(r.Sandbox.CapDrop) != 0 {
		t.Errorf("defaults: ports %#v, cap_add %#v, cap_drop %#v; want empty lists", r.Sandbox.Ports, r.Sandbox.CapAdd, r.Sandbox.CapDrop)
	}
	for _, k := range []string{"sandbox.ports", "sandbox.cap_add", "sandbox.cap_drop"} {
		if s := setting(t, r, k); s.Layer != "default" {
			t.Errorf("%s comes from %q, want default", k, s.Layer)
		}
	}
	r = load(t, map[string]string{
		"base.toml":    img + "ports = [\"9000\"]\ncap_add = [\"SYS_PTRACE\"]\n",
		"sandbox.toml": "presets = [\"./base.toml\"]\n[sandbox]\nports = [\"8080\", \"127.0.0.1:18080:8080\", \"5432:5432/tcp\"]\ncap_add = [\"net_admin\"]\ncap_drop = [\"CAP_MKNOD\"]\n",
	})
	// Arrays replace a lower layer's, as every array but presets and tools does.
	if want := []string{"8080", "127.0.0.1:18080:8080", "5432:5432/tcp"}; !reflect.DeepEqual(r.Sandbox.Ports, want) {
		t.Errorf("ports = %q, want %q", r.Sandbox.Ports, want)
	}
	if !reflect.DeepEqual(r.Sandbox.CapAdd, []string{"net_admin"}) || !reflect.DeepEqual(r.Sandbox.CapDrop, []string{"CAP_MKNOD"}) {
		t.Errorf("cap_add = %q, cap_drop = %q", r.Sandbox.CapAdd, r.Sandbox.CapDrop)
	}
}

func TestPortsAndCapabilitiesErrors(t *testing.T) {
	tests := []struct {
		name, toml, want string
	}{
		{"bad port", img + "ports = [\"8080\", \"web\"]\n",
			`sandbox.toml:3: sandbox.ports: invalid port "web": invalid containerPort: web (use [ip:][host_port:]container_port[/tcp|udp|sctp], e.g. "8080", "127.0.0.1:18080:8080" or "5432:5432/tcp")`},
		{"bad protocol", img + "ports = [\"8080/icmp\"]\n",
			`sandbox.toml:3: sandbox.ports: invalid port "8080/icmp": invalid proto: icmp (use [ip:][host_port:]container_port[/tcp|udp|sctp], e.g. "8080", "127.0.0.1:18080:8080" or "5432:5432/tcp")`},
		{"bad address", img + "ports = [\"localhost:8080:80\"]\n",
			`sandbox.toml:3: sandbox.ports: invalid port "localhost:8080:80": invalid IP address: localhost (use [ip:][host_port:]container_port[/tcp|udp|sctp], e.g. "8080", "127.0.0.1:18080:8080" or "5432:5432/tcp")`},
		{"same host port twice", img + "ports = [\"8080:80\", \"8080:81\"]\n",
			`sandbox.toml:3: sandbox.ports: "8080:80" and "8080:81" both bind host port 8080/tcp`},
		{"ports without a network", img + "network = \"none\"\nports = [\"8080\"]\n",
			`sandbox.toml:4: sandbox.ports: cannot publish ports with sandbox.network = "none" (publishing needs "bridge"; with "host" the sandbox's ports are the host's already)`},
		{"ports on the host network", img + "network = \"host\"\nports = [\"8080\"]\n",
			`sandbox.toml:4: sandbox.ports: cannot publish ports with sandbox.network = "host" (publishing needs "bridge"; with "host" the sandbox's ports are the host's already)`},
		{"ports with egress", img + "ports = [\"8080\"]\n[sandbox.egress]\nallow = [\"example.com\"]\n",
			`sandbox.toml:3: sandbox.ports: cannot publish ports with [sandbox.egress]: the sandbox sits on an internal network, which the Engine publishes no port from`},
		{"unknown cap_add", img + "cap_add = [\"NET_ADMIN\", \"FLY\"]\n",
			`sandbox.toml:3: sandbox.cap_add: unknown capability "FLY" (use a Linux capability name as Docker takes it, with or without CAP_, or ALL; known names: ` + strings.Join(manifest.Capabilities, ", ") + `)`},
		{"unknown cap_drop", img + "cap_drop = [\"CAP_NOPE\"]\n",
			`sandbox.toml:3: sandbox.cap_drop: unknown capability "CAP_NOPE" (use a Linux capability name as Docker takes it, with or without CAP_, or ALL; known names: ` + strings.Join(manifest.Capabilities, ", ") + `)`},
		{"added and dropped", img + "cap_add = [\"net_admin\"]\ncap_drop = [\"CAP_NET_ADMIN\"]\n",
			`sandbox.toml:4: sandbox.cap_drop: NET_ADMIN is also in sandbox.cap_add (name a capability in one of them)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantLines(t, loadErr(t, map[string]string{"sandbox.toml": tt.toml}), tt.want)
		})
	}
}
