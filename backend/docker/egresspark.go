package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/airlock-dev/airlock/backend"
)

// The internal networks of sandboxes behind egress rules are the daemon's,
// made ahead of time with the shared proxy on them and parked: a sandbox
// claims one as it is made (no network to create, no proxy to connect on
// its way) and its removal gives it back, emptied of the sandbox's
// containers and its site on the proxy (none of the sandbox is left on it).
// Each proxy keeps egressParked of them; more are removed. They go when
// their proxy goes (egressHubAt) or the daemon stops (CloseEgress), and a
// daemon that finds some of an earlier one takes them over or removes them
// (sweepEgressNets).

// egressSpare is how many parked networks a proxy makes ahead of time when
// it has none; egressParked how many it keeps at most (given back by the
// sandboxes removed: sandboxes run one after the other use the same two).
const (
	egressSpare  = 1
	egressParked = 4
)

// roleEgressNetwork labels a network made for sandboxes behind egress rules;
// labelEgressHub names its proxy.
const (
	roleEgressNetwork = "egress-network"
	labelEgressHub    = "dev.airlock.egress-proxy"
)

type parkedNet struct{ name, addr string }

// claimEgressNet takes a parked network of hub, or makes one, and makes
// sure the park fills again.
func (rt *Runtime) claimEgressNet(ctx context.Context, hub *egressHub) (name, addr string, err error) {
	hub.mu.Lock()
	if n := len(hub.park); n > 0 {
		p := hub.park[n-1]
		hub.park = hub.park[:n-1]
		hub.mu.Unlock()
		go rt.refillEgressNets(hub)
		return p.name, p.addr, nil
	}
	hub.mu.Unlock()
	name, addr, err = rt.makeEgressNet(ctx, hub)
	if err != nil {
		return "", "", err
	}
	go rt.refillEgressNets(hub)
	return name, addr, nil
}

// makeEgressNet makes an internal network with hub's proxy on it.
func (rt *Runtime) makeEgressNet(ctx context.Context, hub *egressHub) (name, addr string, err error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name = egressNetPrefix + hex.EncodeToString(b[:])
	labels := ownerKey(rt.Owner).label(map[string]string{backend.LabelRole: roleEgressNetwork, labelEgressHub: hub.name})
	if _, err := rt.Engine.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Internal: true, Options: egressNetworkOptions, Labels: labels}); err != nil {
		return "", "", failed("cannot create network %s: %v", name, err)
	}
	addr, err = hub.join(ctx, name)
	if err != nil {
		rt.removeEgressNet(context.WithoutCancel(ctx), hub, name)
		return "", "", err
	}
	return name, addr, nil
}

// refillEgressNets makes networks until hub has egressSpare of them.
func (rt *Runtime) refillEgressNets(hub *egressHub) {
	for {
		hub.mu.Lock()
		if hub.ended() || len(hub.park)+hub.making >= egressSpare {
			hub.mu.Unlock()
			return
		}
		hub.making++
		hub.mu.Unlock()
		name, addr, err := rt.makeEgressNet(context.Background(), hub)
		hub.mu.Lock()
		hub.making--
		keep := err == nil && !hub.ended() && len(hub.park) < egressSpare
		if keep {
			hub.park = append(hub.park, parkedNet{name, addr})
		}
		hub.mu.Unlock()
		if err != nil {
			return
		}
		if !keep {
			rt.removeEgressNet(context.Background(), hub, name)
			return
		}
	}
}

// giveBackEgressNet parks the network of a removed sandbox (its site
// dropped, its containers gone), or removes it when the park is full (after
// the removal: it holds nothing of the sandbox any more).
func (rt *Runtime) giveBackEgressNet(ctx context.Context, hub *egressHub, name, addr string) {
	hub.mu.Lock()
	keep := !hub.ended() && len(hub.park) < egressParked && rt.egressNetEmpty(ctx, hub, name)
	if keep {
		hub.park = append(hub.park, parkedNet{name, addr})
	}
	hub.mu.Unlock()
	if !keep {
		go rt.removeEgressNet(context.Background(), hub, name)
	}
}

// egressNetEmpty reports whether only the proxy is on network name.
func (rt *Runtime) egressNetEmpty(ctx context.Context, hub *egressHub, name string) bool {
	n, err := rt.Engine.NetworkInspect(ctx, name, network.InspectOptions{})
	if err != nil {
		return false
	}
	for id := range n.Containers {
		if id != hub.id {
			return false
		}
	}
	_, on := n.Containers[hub.id]
	return on
}

// removeEgressNet takes the proxy off network name and removes it.
func (rt *Runtime) removeEgressNet(ctx context.Context, hub *egressHub, name string) {
	if hub != nil {
		_ = rt.Engine.NetworkDisconnect(ctx, name, hub.id, true)
	}
	_ = rt.Engine.NetworkRemove(ctx, name)
}

// unparkAll removes hub's parked networks (its proxy stopped).
func (rt *Runtime) unparkAll(hub *egressHub) {
	hub.mu.Lock()
	park := hub.park
	hub.park = nil
	hub.mu.Unlock()
	for _, p := range park {
		rt.removeEgressNet(context.Background(), hub, p.name)
	}
}

// sweepEgressNets, as the daemon first uses hub, takes over the networks an
// earlier daemon parked on it (up to egressParked) and removes the other
// networks of this owner's proxies that no sandbox uses (a proxy that went
// while no daemon ran leaves its networks).
func (rt *Runtime) sweepEgressNets(ctx context.Context, hub *egressHub) {
	if rt.Owner == "" {
		return
	}
	list, err := rt.Engine.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", backend.LabelRole+"="+roleEgressNetwork))})
	if err != nil {
		return
	}
	for _, s := range list {
		if !ownerKey(rt.Owner).owns(s.Labels) || !strings.HasPrefix(s.Name, egressNetPrefix) {
			continue
		}
		n, err := rt.Engine.NetworkInspect(ctx, s.ID, network.InspectOptions{})
		if err != nil {
			continue
		}
		used, addr := false, ""
		for id, ep := range n.Containers {
			if id == hub.id {
				addr = strings.Split(ep.IPv4Address, "/")[0]
			} else if !strings.HasPrefix(ep.Name, egressSharedPrefix) {
				used = true // a sandbox's: its removal gives it back
			}
		}
		if used {
			continue
		}
		hub.mu.Lock()
		keep := addr != "" && len(hub.park) < egressParked
		hub.mu.Unlock()
		if keep && hub.drop(ctx, addr) == nil { // no site of an earlier sandbox stays
			hub.mu.Lock()
			hub.park = append(hub.park, parkedNet{n.Name, addr})
			hub.mu.Unlock()
			continue
		}
		for id := range n.Containers {
			_ = rt.Engine.NetworkDisconnect(ctx, n.ID, id, true)
		}
		_ = rt.Engine.NetworkRemove(ctx, n.ID)
	}
}

// CloseEgress removes the networks the runtime's proxies keep parked, as the
// daemon stops; the proxies exit once idle.
func (rt *Runtime) CloseEgress(ctx context.Context) {
	rt.egress.mu.Lock()
	var hubs []*egressHub
	for _, h := range rt.egress.hubs {
		hubs = append(hubs, h)
	}
	rt.egress.mu.Unlock()
	for _, h := range hubs {
		h.mu.Lock()
		park := h.park
		h.park = nil
		h.mu.Unlock()
		for _, p := range park {
			rt.removeEgressNet(ctx, h, p.name)
		}
	}
}
