package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strconv"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// Egress rules (design.md §7, docs/egress.md): a sandbox with [sandbox.egress] and its
// services sit on a network of their own made with Internal: true (no route out).
// The only way out is an egress proxy: airlock itself (`airlock egress-proxy`),
// run from the injected supervisor volume in a container of the sandbox's image,
// on both that network (as EgressAlias) and the egress network; it forwards HTTP
// and HTTPS (CONNECT) to allowed destinations only and prints a JSON line per
// denied request, which the daemon reads from its logs.

// RoleEgress labels the proxy container.
const RoleEgress = "egress"

// egressName is the Docker name of a sandbox's egress proxy.
func egressName(sandboxID string) string { return objectName(sandboxID) + "-egress" }

// egressProxy is a sandbox's egress proxy container on the Engine.
type egressProxy struct {
	engine client.APIClient
}

// create creates the sandbox's egress proxy container on the egress network,
// connected to the sandbox's internal network as EgressAlias, and starts it.
func (e egressProxy) create(ctx context.Context, sb *backend.Sandbox, r *manifest.Resolved, imageRef string, labels map[string]string) error {
	eg := r.Sandbox.Egress
	cmd := []string{backend.SupervisorIn, "egress-proxy", "--listen", ":" + strconv.Itoa(backend.EgressPort), "--dns", ":53"}
	for _, a := range eg.Allow {
		cmd = append(cmd, "--allow", a)
	}
	cfg := &container.Config{
		Image: imageRef, Entrypoint: cmd, Cmd: []string{}, User: "0",
		Labels: copyLabels(labels, backend.LabelRole, RoleEgress), Hostname: backend.EgressAlias,
	}
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(eg.Network),
		Mounts:      []mount.Mount{{Type: mount.TypeVolume, Source: ownState(sb).supervisorVolume, Target: backend.BinMount, ReadOnly: true}},
		SecurityOpt: []string{"no-new-privileges"},
		CapDrop:     []string{"ALL"},
		// Port 53, where Engines that do not open low ports to everyone
		// (net.ipv4.ip_unprivileged_port_start) ask for it.
		CapAdd: []string{"NET_BIND_SERVICE"},
	}
	c, err := e.engine.ContainerCreate(context.WithoutCancel(ctx), cfg, host, nil, nil, egressName(sb.ID)) // as the primary's
	if err != nil {
		return failed("cannot create the egress proxy (sandbox.egress.network %q): %v", eg.Network, err)
	}
	ownState(sb).egressID = c.ID
	if err := e.engine.NetworkConnect(ctx, sb.Network, c.ID, &network.EndpointSettings{Aliases: []string{backend.EgressAlias}}); err != nil {
		return failed("cannot connect the egress proxy to the sandbox network: %v", err)
	}
	// The proxy starts now, first on the sandbox network, so that its address
	// there is known (the lowest one after the gateway's, which it gets again
	// at every start since it starts before the rest of the sandbox) and the
	// services and the primary get it as their only DNS server.
	if err := e.start(ctx, sb); err != nil {
		return err
	}
	ci, err := e.engine.ContainerInspect(ctx, c.ID)
	if err != nil {
		return failed("cannot inspect the egress proxy: %v", err)
	}
	if ci.NetworkSettings == nil || ci.NetworkSettings.Networks[sb.Network] == nil || ci.NetworkSettings.Networks[sb.Network].IPAddress == "" {
		return failed("cannot find the egress proxy's address on the sandbox network")
	}
	ownState(sb).egressDNS = ci.NetworkSettings.Networks[sb.Network].IPAddress
	return nil
}

// egressNetworkOptions are the driver options of a sandbox network with
// egress rules: besides Internal (no route out, so nothing forwarded leaves),
// its bridge gets no address on the host (Docker's isolation rules filter only
// forwarded traffic: with an address, the host itself, every one of its
// addresses and every port published on them, would be reachable through it).
var egressNetworkOptions = map[string]string{"com.docker.network.bridge.inhibit_ipv4": "true"}

// egressDNS returns the DNS servers of a container on the sandbox network:
// the proxy's resolver only, so that Docker's embedded DNS, which answers the
// names of the sandbox's own containers, forwards every other name to it and
// to no resolver outside.
func egressDNS(sb *backend.Sandbox) []string {
	if ownState(sb).egressDNS == "" {
		return nil
	}
	return []string{ownState(sb).egressDNS}
}

// start starts the proxy (before the services and the primary).
func (e egressProxy) start(ctx context.Context, sb *backend.Sandbox) error {
	if ownState(sb).egressID == "" {
		return nil
	}
	if err := e.engine.ContainerStart(ctx, ownState(sb).egressID, container.StartOptions{}); err != nil {
		return failed("cannot start the egress proxy: %v", err)
	}
	return nil
}

// FollowEgress calls denied for each request a sandbox's egress proxy refuses,
// read from its output through the Engine API, until the proxy stops or ctx ends.
// Lines are bounded; anything that does not decode is skipped.
func (rt *Runtime) FollowEgress(ctx context.Context, sandboxID string, denied func(backend.EgressDenial)) error {
	rc, err := rt.Engine.ContainerLogs(ctx, egressName(sandboxID), container.LogsOptions{ShowStdout: true, Follow: true})
	if err != nil {
		return err
	}
	defer rc.Close()
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, io.Discard, rc)
		pw.CloseWithError(err)
	}()
	err = scanDenials(pr, denied)
	pr.Close()
	return err
}

// maxDenialLine bounds a line of the proxy's output that can be a denial.
const maxDenialLine = 4096

// scanDenials calls denied for each line of r that decodes as a denial. A line
// longer than maxDenialLine (a client can make the proxy print one, with a long
// CONNECT target) is skipped, up to its end, without ending the scan: one such
// line must not stop the recording of every later denial.
func scanDenials(r io.Reader, denied func(backend.EgressDenial)) error {
	br := bufio.NewReaderSize(r, maxDenialLine)
	long := false
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			long = true
			continue
		case long:
			long = false // the end of a skipped line
		default:
			var d backend.EgressDenial
			if json.Unmarshal(line, &d) == nil && d.Host != "" && len(d.Host) <= 255 {
				denied(d)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// egressCapDrop returns the capabilities to drop from a container behind
// egress rules: drop plus NET_RAW (in Docker's default set), unless the
// manifest adds it (or ALL) itself. With it, code inside could put frames of
// its own on the sandbox's bridge, and the host answers ARP for its addresses
// and accepts datagrams addressed to them on any interface, even one without
// an address (replies have no route back, but one-way datagrams arrive).
func egressCapDrop(r *manifest.Resolved, add, drop []string) []string {
	if r.Sandbox.Egress == nil {
		return drop
	}
	for _, c := range append(slices.Clone(add), drop...) {
		if c == netRaw || c == manifest.AllCapabilities {
			return drop
		}
	}
	return append(slices.Clone(drop), netRaw)
}

const netRaw = "CAP_NET_RAW"
