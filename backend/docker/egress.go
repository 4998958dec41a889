package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/egress"
	"github.com/airlock-dev/airlock/manifest"
)

// Egress rules (docs/egress.md): a sandbox with [sandbox.egress] and its
// services sit on a network of their own made with Internal: true (no route
// out). The only way out is the daemon's egress proxy for the sandbox's egress
// network: airlock itself (`airlock egress-proxy --shared`), run from the
// supervisor volume in one long-lived container on that egress network
// (egressHub), connected to each sandbox's network as EgressAlias. The daemon
// gives it, for the address it got on a sandbox's network, that sandbox's
// allow list; it serves each address with listeners of its own, forwards HTTP
// and HTTPS (CONNECT) to allowed destinations only, and prints a JSON line per
// denied request with the address it arrived on, which tells the daemon whose
// it is. The proxy exits (and the Engine removes it) once no sandbox used it
// for egressLinger.

// RoleEgress labels a sandbox's own egress proxy container (made by airlock
// before the proxy was shared: found, started and removed with the sandbox).
const RoleEgress = "egress"

// RoleEgressShared labels a daemon's shared egress proxy.
const RoleEgressShared = "egress-shared"

// egressSharedPrefix starts the names of shared egress proxies, and
// egressNetPrefix those of the internal networks made for sandboxes behind
// egress rules. A sandbox's objects are named airlock-ID, and an ID has no
// dot: no sandbox's name starts so.
const (
	egressSharedPrefix = "airlock.egress-"
	egressNetPrefix    = "airlock.egress-net-"
)

// egressLinger is how long a shared proxy waits, with no sandbox to serve,
// before it exits.
const egressLinger = 2 * time.Minute

// egressRootImage is the empty root file system the shared proxy runs in
// (its binary is the supervisor volume's): no sandbox's image.
const egressRootImage = "airlock-egress-root:1"

// egressName is the Docker name of a sandbox's own egress proxy (before the
// proxy was shared).
func egressName(sandboxID string) string { return objectName(sandboxID) + "-egress" }

// egressProxy is the part of a sandbox's Create, Start and Stop that concerns
// its egress proxy.
type egressProxy struct {
	rt *Runtime
}

// create puts the sandbox on an internal network of the daemon's proxy for
// its egress network (made or found): one parked ahead of time, the proxy
// on it already (else one made now), and gives the proxy the sandbox's rules
// for its address there, which becomes the DNS server of the sandbox's
// containers. The network is the sandbox's until its removal, which gives it
// back to the park (egresspark.go).
func (e egressProxy) create(ctx context.Context, sb *backend.Sandbox, r *manifest.Resolved) error {
	eg := r.Sandbox.Egress
	hub, err := e.rt.egressHub(ctx, eg.Network, ownState(sb).supervisorVolume)
	if err != nil {
		return err
	}
	done := e.rt.step(sb.ID, "egress")
	defer done()
	netName, addr, err := e.rt.claimEgressNet(ctx, hub)
	if err != nil {
		return err
	}
	sb.Network = netName
	e.rt.egress.bind(sb.ID, hub, addr, netName) // a failed create's removal gives it back
	if err := hub.site(ctx, addr, eg.Allow); err != nil {
		return err
	}
	ownState(sb).egressDNS = addr
	return nil
}

// start gives the proxy the sandbox's rules again when the sandbox starts
// again (the proxy may have gone meanwhile, or the daemon restarted), or
// starts the sandbox's own proxy of an older airlock.
func (e egressProxy) start(ctx context.Context, sb *backend.Sandbox) error {
	if id := ownState(sb).egressID; id != "" {
		if err := e.rt.Engine.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
			return failed("cannot start the egress proxy: %v", err)
		}
		return nil
	}
	r := ownState(sb).manifest
	if r == nil || r.Sandbox.Egress == nil || sb.Network == "" || ownState(sb).fresh {
		return nil // a fresh sandbox's site was given at its creation
	}
	vol := ownState(sb).supervisorVolume
	if vol == "" {
		vol = supervisorVolumeOf(ctx, e.rt.Engine, sb.PrimaryID)
	}
	hub, err := e.rt.egressHub(ctx, r.Sandbox.Egress.Network, vol)
	if err != nil {
		return err
	}
	addr, err := hub.join(ctx, sb.Network)
	if err != nil {
		return err
	}
	if err := hub.site(ctx, addr, r.Sandbox.Egress.Allow); err != nil {
		return err
	}
	ownState(sb).egressDNS = addr
	e.rt.egress.bind(sb.ID, hub, addr, sb.Network)
	return nil
}

// supervisorVolumeOf is the supervisor volume a sandbox's primary mounts.
func supervisorVolumeOf(ctx context.Context, eng client.APIClient, primaryID string) string {
	ci, err := eng.ContainerInspect(ctx, primaryID)
	if err != nil {
		return ""
	}
	for _, m := range ci.Mounts {
		if m.Type == mount.TypeVolume && m.Destination == backend.BinMount {
			return m.Name
		}
	}
	return ""
}

// egressRelease ends the sandbox's site on its proxy (at its stop): its
// listeners close, and its denial follower ends once every denial the proxy
// printed before is delivered.
func (rt *Runtime) egressRelease(ctx context.Context, id string) {
	if b := rt.egressLookup(ctx, id); b.hub != nil {
		_ = b.hub.drop(ctx, b.addr)
	}
}

// egressLeave ends the site of a removed sandbox b (egressLookup, before its
// containers went) and gives its network back to the park, or removes it.
func (rt *Runtime) egressLeave(ctx context.Context, id string, b egressBinding) {
	if b.hub == nil {
		return
	}
	_ = b.hub.drop(ctx, b.addr)
	rt.egress.unbind(id)
	if strings.HasPrefix(b.net, egressNetPrefix) {
		rt.giveBackEgressNet(ctx, b.hub, b.net, b.addr)
		return
	}
	_ = rt.Engine.NetworkDisconnect(context.WithoutCancel(ctx), b.net, b.hub.name, true)
}

// egressLookup finds which shared proxy serves sandbox id, at which address,
// on which network: known to this process, else from the Engine (a daemon
// that restarted knows only what the Engine says).
func (rt *Runtime) egressLookup(ctx context.Context, id string) egressBinding {
	if b := rt.egress.of(id); b.hub != nil {
		return b
	}
	netName := rt.egressNetOf(ctx, id)
	if netName == "" {
		return egressBinding{}
	}
	n, err := rt.Engine.NetworkInspect(ctx, netName, network.InspectOptions{})
	if err != nil || !ownerKey(rt.Owner).owns(n.Labels) {
		return egressBinding{}
	}
	for _, ep := range n.Containers {
		if !strings.HasPrefix(ep.Name, egressSharedPrefix) {
			continue
		}
		p, err := netip.ParsePrefix(ep.IPv4Address)
		if err != nil {
			continue
		}
		hub, err := rt.egressHubByName(ctx, ep.Name)
		if err != nil {
			return egressBinding{}
		}
		return egressBinding{hub: hub, addr: p.Addr().String(), net: netName}
	}
	return egressBinding{}
}

// egressNetOf is the network of sandbox id behind egress rules: a parked one
// its primary joined, or one named after the sandbox; "" for none.
func (rt *Runtime) egressNetOf(ctx context.Context, id string) string {
	objs, err := listObjects(ctx, rt.Engine, ownerKey(rt.Owner), id)
	if err == nil && objs.primary != nil && strings.HasPrefix(objs.primary.HostConfig.NetworkMode, egressNetPrefix) {
		return objs.primary.HostConfig.NetworkMode
	}
	if n, err := rt.Engine.NetworkInspect(ctx, objectName(id), network.InspectOptions{}); err == nil && ownerKey(rt.Owner).owns(n.Labels) {
		return n.Name
	}
	return ""
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

// FollowEgress calls denied for each request the egress proxy refuses to
// sandbox sandboxID, until the sandbox's site ends (its stop or removal), the
// proxy stops or ctx ends. Lines are bounded; anything that does not decode is
// skipped.
func (rt *Runtime) FollowEgress(ctx context.Context, sandboxID string, denied func(backend.EgressDenial)) error {
	b := rt.egressLookup(ctx, sandboxID)
	if b.hub == nil {
		return rt.followOwnEgress(ctx, sandboxID, denied)
	}
	hub, addr := b.hub, b.addr
	end := hub.subscribe(addr, denied)
	defer hub.unsubscribe(addr, end)
	select {
	case <-end:
	case <-hub.done:
	case <-ctx.Done():
	}
	return nil
}

// SyncEgress returns once the denials the proxy made for sandbox id so far
// were passed to its follower: the reply to a command comes after them.
func (rt *Runtime) SyncEgress(ctx context.Context, id string) error {
	b := rt.egressLookup(ctx, id)
	if b.hub == nil {
		return nil
	}
	return b.hub.call(ctx, egress.Command{Op: "sync", Addr: b.addr})
}

// followOwnEgress follows a sandbox's own proxy (of an older airlock) through
// its output, until it stops.
func (rt *Runtime) followOwnEgress(ctx context.Context, sandboxID string, denied func(backend.EgressDenial)) error {
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
	return scanLines(r, func(line []byte) {
		var d backend.EgressDenial
		if json.Unmarshal(line, &d) == nil && d.Host != "" && len(d.Host) <= 255 {
			denied(d)
		}
	})
}

// scanLines calls each for each line of r of at most maxDenialLine bytes;
// longer lines are skipped to their end.
func scanLines(r io.Reader, each func([]byte)) error {
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
			each(line)
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
