package manifest

import "github.com/docker/go-connections/nat"

// Parsed holds the values sandbox.toml writes as strings (ports, sizes, extra
// hosts, a service's volumes and tmpfs) read into the types the backends use,
// so that no backend parses a manifest's string again. They are derived from
// the manifest and never travel: Load computes them once the manifest is
// valid and substituted, Restore (and so FromWire) from the manifest it
// restores.
type Parsed struct {
	Sandbox SandboxValues
	// Services are each service's values, by the service's name.
	Services map[string]ServiceValues
}

// SandboxValues are the values of [sandbox] read.
type SandboxValues struct {
	// Ports are the mappings of sandbox.ports, in the order of its entries,
	// one a port of a range; an entry without an address binds DefaultPortIP.
	Ports []nat.PortMapping
	// Memory is sandbox.memory in bytes; 0 is no limit.
	Memory int64
	// ExtraHosts are sandbox.extra_hosts, one an entry.
	ExtraHosts []ExtraHost
}

// EnginePorts are Ports as the Engine takes them: the container ports to
// expose and their host bindings (nil, nil without ports).
func (v SandboxValues) EnginePorts() (nat.PortSet, nat.PortMap) {
	return enginePorts(v.Ports)
}

// ServiceValues are the values of one [services.<name>] read. Each list has
// one element an entry of its key, in the same order: Volumes[i] is
// services.<name>.volumes[i].
type ServiceValues struct {
	Volumes []ServiceVolume
	Tmpfs   []Tmpfs
	// ShmSize is shm_size in bytes; 0 is the Engine's default.
	ShmSize    int64
	ExtraHosts []ExtraHost
	Ports      []ServicePort
}

// Tmpfs is one entry of services.*.tmpfs: a tmpfs at Target, mounted with
// Options (as mount takes them, such as size=64m,mode=1777; "" for none).
type Tmpfs struct {
	Target, Options string
}

// ExtraHost is one extra_hosts entry: Name resolves to IP (an address, or
// host-gateway: the Engine's address for the host).
type ExtraHost struct {
	Name, IP string
}

// String is the entry as the Engine takes it: NAME:IP.
func (h ExtraHost) String() string { return h.Name + ":" + h.IP }

// parseValues reads the typed values of m. A list with an entry that does not
// read is left empty, and a size that does not read is 0: validation reports
// those, and a manifest is used only once it validates.
func parseValues(m *Manifest) Parsed {
	var p Parsed
	p.Sandbox.Ports, _ = portMappings(m.Sandbox.Ports)
	if m.Sandbox.Memory != "" {
		p.Sandbox.Memory, _ = parseMemory(m.Sandbox.Memory)
	}
	p.Sandbox.ExtraHosts = readEach(m.Sandbox.ExtraHosts, parseExtraHost)
	if len(m.Services) > 0 {
		p.Services = make(map[string]ServiceValues, len(m.Services))
	}
	for name, s := range m.Services {
		v := ServiceValues{
			Volumes:    readEach(s.Volumes, parseServiceVolume),
			Tmpfs:      readEach(s.Tmpfs, parseTmpfs),
			ExtraHosts: readEach(s.ExtraHosts, parseExtraHost),
			Ports:      readEach(s.Ports, parseServicePort),
		}
		if s.ShmSize != "" {
			v.ShmSize, _ = parseSize(s.ShmSize)
		}
		p.Services[name] = v
	}
	return p
}

// readEach reads every entry of a list with read: nil for an empty list, or
// when an entry does not read.
func readEach[T any](entries []string, read func(string) (T, error)) []T {
	if len(entries) == 0 {
		return nil
	}
	out := make([]T, 0, len(entries))
	for _, e := range entries {
		v, err := read(e)
		if err != nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}
