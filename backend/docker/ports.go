package docker

import (
	"context"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// Published ports (sandbox.ports): the primary container exposes them and the
// Engine binds them on the host when it starts (127.0.0.1 unless the entry names
// an address). What was bound, random host ports included, is read back from the
// container after each start.

// capabilities are sandbox.cap_add and cap_drop as the Engine takes them.
func capabilities(r *manifest.Resolved) (add, drop []string, err error) {
	if add, err = manifest.NormalizeCapabilities(r.Sandbox.CapAdd); err != nil {
		return nil, nil, configErr("sandbox.cap_add: %v", err)
	}
	if drop, err = manifest.NormalizeCapabilities(r.Sandbox.CapDrop); err != nil {
		return nil, nil, configErr("sandbox.cap_drop: %v", err)
	}
	return add, drop, nil
}

// publishedPorts lists the host bindings of a running container, in order.
func publishedPorts(m nat.PortMap) []backend.Port {
	var out []backend.Port
	for p, bs := range m {
		for _, b := range bs {
			hp, err := strconv.Atoi(b.HostPort)
			if err != nil {
				continue // exposed, not published
			}
			out = append(out, backend.Port{HostIP: b.HostIP, HostPort: hp, ContainerPort: p.Int(), Protocol: p.Proto()})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.ContainerPort != b.ContainerPort:
			return a.ContainerPort < b.ContainerPort
		case a.Protocol != b.Protocol:
			return a.Protocol < b.Protocol
		case a.HostIP != b.HostIP:
			return a.HostIP < b.HostIP
		}
		return a.HostPort < b.HostPort
	})
	return out
}

// readPorts reads what the Engine bound for a started sandbox's ports (nil
// when the manifest publishes none, or the Engine cannot say).
func readPorts(ctx context.Context, eng client.APIClient, sb *backend.Sandbox) []backend.Port {
	if ownState(sb).manifest == nil || len(ownState(sb).manifest.Sandbox.Ports) == 0 {
		return nil
	}
	ci, err := eng.ContainerInspect(ctx, sb.PrimaryID)
	if err != nil || ci.NetworkSettings == nil {
		return nil
	}
	return publishedPorts(ci.NetworkSettings.Ports)
}

// Messages of the Engine (and Docker Desktop) about a host port it cannot bind.
var (
	portAllocatedRE = regexp.MustCompile(`Bind for (\S+) failed: port is already allocated`)
	addrInUseRE     = regexp.MustCompile(`listen (?:tcp|udp|sctp)[46]? (\S+): bind: address already in use`)
	bindHostPortRE  = regexp.MustCompile(`failed to bind host port (?:for )?(\S+?:\d+)(?:[:/]\S*)?: address already in use`)
)

// portInUse maps a start error about a taken host port to a PortInUseError
// naming the port and its sandbox.ports entry; other errors give nil.
func portInUse(err error, specs []string) *backend.PortInUseError {
	if err == nil || len(specs) == 0 {
		return nil
	}
	msg := err.Error()
	if !strings.Contains(msg, "port is already allocated") && !strings.Contains(msg, "address already in use") {
		return nil
	}
	pe := &backend.PortInUseError{Err: err}
	for _, re := range []*regexp.Regexp{portAllocatedRE, addrInUseRE, bindHostPortRE} {
		if m := re.FindStringSubmatch(msg); m != nil {
			pe.Addr = m[1]
			break
		}
	}
	if i := strings.LastIndex(pe.Addr, ":"); i > 0 {
		ip := strings.Trim(pe.Addr[:i], "[]")
		pe.Addr = net.JoinHostPort(ip, pe.Addr[i+1:])
		pe.Spec = manifest.PortSpecFor(specs, ip, pe.Addr[strings.LastIndex(pe.Addr, ":")+1:])
	}
	return pe
}
