package manifest

import (
	"fmt"
	"net"
	"strings"

	"github.com/docker/go-connections/nat"
)

// DefaultPortIP is the host address a sandbox.ports entry without one binds:
// a development sandbox should not listen on every interface by accident.
const DefaultPortIP = "127.0.0.1"

// MaxPorts bounds how many ports sandbox.ports publishes in all (a range
// counts each of its ports): the Engine runs a proxy for each one.
const MaxPorts = 1024

// portSyntax is what an invalid sandbox.ports entry is told to look like.
const portSyntax = `use [ip:][host_port:]container_port[/tcp|udp|sctp], e.g. "8080", "127.0.0.1:18080:8080" or "5432:5432/tcp"`

// parsePort reads one sandbox.ports entry in Docker's syntax (parsed by the
// Engine's own go-connections/nat) into its port mappings, one per port of a
// range. An entry without an IP binds DefaultPortIP; an empty host port lets
// the Engine pick a free one.
func parsePort(spec string) ([]nat.PortMapping, error) {
	if strings.TrimSpace(spec) != spec || spec == "" {
		return nil, fmt.Errorf("invalid port %q (%s)", spec, portSyntax)
	}
	ms, err := nat.ParsePortSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("invalid port %q: %v (%s)", spec, err, portSyntax)
	}
	for i := range ms {
		if ms[i].Port.Int() == 0 {
			return nil, fmt.Errorf("invalid port %q: the container port must be from 1 to 65535", spec)
		}
		if ms[i].Binding.HostIP == "" {
			ms[i].Binding.HostIP = DefaultPortIP
		}
	}
	return ms, nil
}

// portMappings reads sandbox.ports into its mappings, in order (nil without
// ports). It reports the first invalid entry, more than MaxPorts ports, and
// two entries that bind the same host port.
func portMappings(specs []string) ([]nat.PortMapping, error) {
	var out []nat.PortMapping
	type bound struct {
		spec string
		ip   net.IP
	}
	taken := map[string][]bound{} // "8080/tcp" → the entries binding host port 8080/tcp
	for _, spec := range specs {
		ms, err := parsePort(spec)
		if err != nil {
			return nil, err
		}
		if len(out)+len(ms) > MaxPorts {
			return nil, fmt.Errorf("publishes more than %d ports (a range counts each of its ports)", MaxPorts)
		}
		out = append(out, ms...)
		for _, m := range ms {
			hp := m.Binding.HostPort
			if hp == "" || hp == "0" || strings.Contains(hp, "-") {
				continue // picked by the Engine
			}
			key := hp + "/" + m.Port.Proto()
			ip := net.ParseIP(m.Binding.HostIP)
			for _, o := range taken[key] {
				if ip.Equal(o.ip) || ip.IsUnspecified() || o.ip.IsUnspecified() {
					if o.spec == spec {
						return nil, fmt.Errorf("%q binds host port %s twice", spec, key)
					}
					return nil, fmt.Errorf("%q and %q both bind host port %s", o.spec, spec, key)
				}
			}
			taken[key] = append(taken[key], bound{spec, ip})
		}
	}
	return out, nil
}

// enginePorts are mappings as the Engine takes them: the container ports to
// expose and their host bindings, in the mappings' order (nil, nil without
// mappings).
func enginePorts(ms []nat.PortMapping) (nat.PortSet, nat.PortMap) {
	if len(ms) == 0 {
		return nil, nil
	}
	exposed, bindings := nat.PortSet{}, nat.PortMap{}
	for _, m := range ms {
		exposed[m.Port] = struct{}{}
		bindings[m.Port] = append(bindings[m.Port], m.Binding)
	}
	return exposed, bindings
}

// PortSpecFor returns the sandbox.ports entry that binds host port hostPort
// (and host address hostIP, when not empty), for messages about that binding;
// "" when none names it.
func PortSpecFor(specs []string, hostIP, hostPort string) string {
	for _, spec := range specs {
		ms, err := parsePort(spec)
		if err != nil {
			continue
		}
		for _, m := range ms {
			if m.Binding.HostPort != hostPort {
				continue
			}
			want, got := net.ParseIP(hostIP), net.ParseIP(m.Binding.HostIP)
			if hostIP == "" || want.Equal(got) || got.IsUnspecified() || (want != nil && want.IsUnspecified()) {
				return spec
			}
		}
	}
	return ""
}
