package manifest

import "github.com/docker/go-connections/nat"

// The readers of single values, for the tests of their syntax: outside this
// package a manifest's values are read from Resolved.Parsed.
var (
	ParsePort          = parsePort
	ParseServiceVolume = parseServiceVolume
	ParseServicePort   = parseServicePort
	ParseMemory        = parseMemory
)

// ParsePorts is sandbox.ports as the Engine takes it (SandboxValues.EnginePorts).
func ParsePorts(specs []string) (nat.PortSet, nat.PortMap, error) {
	ms, err := portMappings(specs)
	if err != nil {
		return nil, nil, err
	}
	exposed, bindings := enginePorts(ms)
	if exposed == nil {
		exposed, bindings = nat.PortSet{}, nat.PortMap{}
	}
	return exposed, bindings, nil
}

// ParseExtraHost is an extra_hosts entry as the Engine takes it (NAME:IP).
func ParseExtraHost(s string) (string, error) {
	h, err := parseExtraHost(s)
	if err != nil {
		return "", err
	}
	return h.String(), nil
}
