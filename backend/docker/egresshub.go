package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/egress"
)

// labelEgressNetwork names the egress network a shared proxy reaches out on.
const labelEgressNetwork = "dev.airlock.egress-network"

// egressCallTimeout bounds a command to the shared proxy.
const egressCallTimeout = 10 * time.Second

// egressHubs are the runtime's shared egress proxies, by container name, and
// which one serves each sandbox at which address.
type egressHubs struct {
	make sync.Mutex // one find-or-make at a time
	mu   sync.Mutex
	hubs map[string]*egressHub
	sbs  map[string]egressBinding
}

// egressBinding is where a sandbox is served: the proxy, its address on the
// sandbox's network, that network.
type egressBinding struct {
	hub  *egressHub
	addr string
	net  string
}

func (h *egressHubs) bind(id string, hub *egressHub, addr, net string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sbs == nil {
		h.sbs = map[string]egressBinding{}
	}
	h.sbs[id] = egressBinding{hub, addr, net}
}

func (h *egressHubs) unbind(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.sbs, id)
}

// of is the proxy serving sandbox id and its address there (nil when not
// known to this process, or when that proxy is gone).
func (h *egressHubs) of(id string) egressBinding {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.sbs[id]
	if !ok || b.hub.ended() {
		return egressBinding{}
	}
	return b
}

// egressHub is the daemon's connection to a shared proxy: commands written to
// its stdin, replies and denials read from its stdout (one attach stream).
type egressHub struct {
	engine client.APIClient
	name   string
	id     string
	conn   types.HijackedResponse

	wmu   sync.Mutex // writes
	mu    sync.Mutex
	seq   int64
	waits map[int64]chan egress.Reply
	subs  map[string]*egressSub
	done  chan struct{} // closed when the stream ended (the proxy stopped)

	// The internal networks parked for the next sandboxes, the proxy on them
	// (egresspark.go), and how many are being made.
	park   []parkedNet
	making int
}

// egressSub is where the denials of a site go: kept (up to
// maxPendingDenials) until its follower comes, then to the follower.
type egressSub struct {
	denied  func(backend.EgressDenial)
	pending []backend.EgressDenial
	end     chan struct{}
}

// maxPendingDenials bounds the denials of a site kept until its follower
// comes (a main command denied at once, before the daemon follows it).
const maxPendingDenials = 10000

func (h *egressHub) ended() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// egressHubName is the name of the shared proxy of owner's daemon for an
// egress network, run from a supervisor volume (another build of airlock
// gets a proxy of its own; the old one exits once it serves no sandbox).
func egressHubName(owner, egressNet, vol string) string {
	h := sha256.Sum256([]byte(owner + "\x00" + egressNet + "\x00" + vol))
	return egressSharedPrefix + hex.EncodeToString(h[:6])
}

// egressHub finds, or makes and starts, the shared proxy for egressNet.
func (rt *Runtime) egressHub(ctx context.Context, egressNet, vol string) (*egressHub, error) {
	if vol == "" {
		return nil, failed("cannot start the egress proxy: no supervisor volume")
	}
	return rt.egressHubAt(ctx, egressHubName(rt.Owner, egressNet, vol), func(ctx context.Context, name string) error {
		return rt.makeEgressProxy(ctx, name, egressNet, vol)
	})
}

// egressHubByName attaches to the running shared proxy name (nil make: it is
// not made when it is gone).
func (rt *Runtime) egressHubByName(ctx context.Context, name string) (*egressHub, error) {
	return rt.egressHubAt(ctx, name, nil)
}

func (rt *Runtime) egressHubAt(ctx context.Context, name string, make func(context.Context, string) error) (*egressHub, error) {
	hs := &rt.egress
	hs.mu.Lock()
	hub := hs.hubs[name]
	hs.mu.Unlock()
	if hub != nil && !hub.ended() {
		return hub, nil
	}
	hs.make.Lock()
	defer hs.make.Unlock()
	hs.mu.Lock()
	hub = hs.hubs[name]
	hs.mu.Unlock()
	if hub != nil && !hub.ended() {
		return hub, nil
	}
	for attempt := 0; ; attempt++ {
		if attempt > 50 {
			return nil, failed("cannot start the egress proxy %s: it is still going away", name)
		}
		ci, err := rt.Engine.ContainerInspect(ctx, name)
		switch {
		case err == nil && ci.State != nil && ci.State.Running && ci.Config != nil && ownerKey(rt.Owner).owns(ci.Config.Labels) && ci.Config.Labels[backend.LabelRole] == RoleEgressShared:
			hub, err := attachEgressHub(rt.Engine, name, ci.ID)
			if err != nil {
				return nil, err
			}
			if hub.ended() {
				continue // it exited as it was attached to
			}
			rt.sweepEgressNets(ctx, hub)
			go func() {
				<-hub.done
				rt.unparkAll(hub)
			}()
			hs.mu.Lock()
			if hs.hubs == nil {
				hs.hubs = map[string]*egressHub{}
			}
			hs.hubs[name] = hub
			hs.mu.Unlock()
			return hub, nil
		case err == nil && make != nil && ci.State != nil && !ci.State.Running && !ci.State.Restarting && ci.State.Status != "removing" && ci.State.Status != "exited" && ci.State.Status != "dead":
			// Created but never started (a make that failed half-way).
			if err := rt.Engine.ContainerStart(ctx, ci.ID, container.StartOptions{}); err != nil {
				_ = rt.Engine.ContainerRemove(context.WithoutCancel(ctx), ci.ID, container.RemoveOptions{Force: true})
			}
		case err == nil && make != nil:
			// Exited: the Engine removes it (or it is left from an Engine
			// restart); out of the way.
			_ = rt.Engine.ContainerRemove(context.WithoutCancel(ctx), ci.ID, container.RemoveOptions{Force: true})
			time.Sleep(50 * time.Millisecond)
		case err == nil:
			return nil, failed("cannot reach the egress proxy %s: it is not running", name)
		case cerrdefs.IsNotFound(err) && make != nil:
			if err := make(ctx, name); err != nil {
				if cerrdefs.IsConflict(err) || strings.Contains(err.Error(), "already in use") || strings.Contains(err.Error(), "is already in progress") {
					time.Sleep(50 * time.Millisecond)
					continue // the previous one is still being removed
				}
				return nil, err
			}
		default:
			return nil, failed("cannot find the egress proxy %s: %v", name, err)
		}
	}
}

// makeEgressProxy creates and starts the shared proxy name on egressNet.
func (rt *Runtime) makeEgressProxy(ctx context.Context, name, egressNet, vol string) error {
	if err := rt.egressRoot(ctx); err != nil {
		return err
	}
	cmd := []string{backend.SupervisorIn, "egress-proxy", "--shared", "--linger", egressLinger.String()}
	cfg := &container.Config{
		Image: egressRootImage, Entrypoint: cmd, Cmd: []string{}, User: "0",
		Labels:    ownerKey(rt.Owner).label(map[string]string{backend.LabelRole: RoleEgressShared, labelEgressNetwork: egressNet}),
		Hostname:  backend.EgressAlias,
		OpenStdin: true, AttachStdin: true, AttachStdout: true, AttachStderr: true,
	}
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(egressNet),
		AutoRemove:  true, // once it exits (no sandbox served for egressLinger)
		Mounts:      []mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: backend.BinMount, ReadOnly: true}},
		SecurityOpt: []string{"no-new-privileges"},
		CapDrop:     []string{"ALL"},
		// Port 53, where Engines that do not open low ports to everyone
		// (net.ipv4.ip_unprivileged_port_start) ask for it.
		CapAdd:    []string{"NET_BIND_SERVICE"},
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "1"}},
	}
	c, err := rt.Engine.ContainerCreate(context.WithoutCancel(ctx), cfg, host, nil, nil, name)
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return err
		}
		return failed("cannot create the egress proxy (sandbox.egress.network %q): %v", egressNet, err)
	}
	if err := rt.Engine.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		_ = rt.Engine.ContainerRemove(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true})
		return failed("cannot start the egress proxy (sandbox.egress.network %q): %v", egressNet, err)
	}
	return nil
}

// egressRoot makes the shared proxy's image when the Engine lacks it: an
// empty root file system (a few directories), imported, not pulled.
func (rt *Runtime) egressRoot(ctx context.Context) error {
	if _, err := rt.Engine.ImageInspect(ctx, egressRootImage); err == nil {
		return nil
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []struct {
		name string
		mode int64
	}{{"etc/", 0o755}, {"tmp/", 0o1777}, {"proc/", 0o555}, {"sys/", 0o555}, {"dev/", 0o755}} {
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode, ModTime: time.Unix(0, 0)})
	}
	_ = tw.Close()
	rc, err := rt.Engine.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, egressRootImage, image.ImportOptions{})
	if err != nil {
		return failed("cannot make the egress proxy's image %s: %v", egressRootImage, err)
	}
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
	if _, err := rt.Engine.ImageInspect(ctx, egressRootImage); err != nil {
		return failed("cannot make the egress proxy's image %s: %v", egressRootImage, err)
	}
	return nil
}

// attachEgressHub attaches to the proxy's stdin and stdout and reads them.
func attachEgressHub(eng client.APIClient, name, id string) (*egressHub, error) {
	conn, err := eng.ContainerAttach(context.Background(), id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true})
	if err != nil {
		return nil, failed("cannot attach to the egress proxy: %v", err)
	}
	hub := &egressHub{engine: eng, name: name, id: id, conn: conn, waits: map[int64]chan egress.Reply{}, subs: map[string]*egressSub{}, done: make(chan struct{})}
	go hub.read()
	return hub, nil
}

// read reads the proxy's replies and denials, in their order, until it stops.
func (h *egressHub) read() {
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, io.Discard, h.conn.Reader)
		pw.CloseWithError(err)
	}()
	_ = scanLines(pr, h.line)
	pr.Close()
	h.conn.Close()
	h.mu.Lock()
	close(h.done)
	h.mu.Unlock()
}

func (h *egressHub) line(b []byte) {
	var v struct {
		Seq   int64  `json:"seq"`
		Error string `json:"error"`
		egress.SiteDenial
	}
	if json.Unmarshal(b, &v) != nil {
		return
	}
	h.mu.Lock()
	if v.Seq > 0 {
		ch := h.waits[v.Seq]
		delete(h.waits, v.Seq)
		h.mu.Unlock()
		if ch != nil {
			ch <- egress.Reply{Seq: v.Seq, Error: v.Error}
		}
		return
	}
	defer h.mu.Unlock()
	sub := h.subs[v.Addr]
	if sub == nil || v.Host == "" || len(v.Host) > 255 {
		return
	}
	d := backend.EgressDenial{Host: v.Host, Port: v.Port, Method: v.Method}
	switch {
	case sub.denied != nil:
		sub.denied(d) // under mu: in the proxy's order, the kept ones first
	case len(sub.pending) < maxPendingDenials:
		sub.pending = append(sub.pending, d)
	}
}

// call sends c and waits for its reply.
func (h *egressHub) call(ctx context.Context, c egress.Command) error {
	ch := make(chan egress.Reply, 1)
	h.mu.Lock()
	h.seq++
	c.Seq = h.seq
	h.waits[c.Seq] = ch
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.waits, c.Seq)
		h.mu.Unlock()
	}()
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	h.wmu.Lock()
	_, err = h.conn.Conn.Write(append(b, '\n'))
	h.wmu.Unlock()
	if err != nil {
		return err
	}
	t := time.NewTimer(egressCallTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.Error != "" {
			return errors.New(r.Error)
		}
		return nil
	case <-h.done:
		return errors.New("the proxy stopped")
	case <-t.C:
		return errors.New("no answer")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// join connects the proxy to a sandbox's network (unless it is on it) and
// returns its address there.
func (h *egressHub) join(ctx context.Context, netName string) (string, error) {
	if a := h.addrOn(ctx, netName); a != "" {
		return a, nil
	}
	if err := h.engine.NetworkConnect(ctx, netName, h.id, &network.EndpointSettings{Aliases: []string{backend.EgressAlias}}); err != nil {
		return "", failed("cannot connect the egress proxy to the sandbox network: %v", err)
	}
	if a := h.addrOn(ctx, netName); a != "" {
		return a, nil
	}
	return "", failed("cannot find the egress proxy's address on the sandbox network")
}

func (h *egressHub) addrOn(ctx context.Context, netName string) string {
	ci, err := h.engine.ContainerInspect(ctx, h.id)
	if err != nil || ci.NetworkSettings == nil {
		return ""
	}
	for name, ep := range ci.NetworkSettings.Networks {
		if ep != nil && (name == netName || ep.NetworkID == netName) {
			return ep.IPAddress
		}
	}
	return ""
}

// site gives the proxy a sandbox's allow list for its address addr.
func (h *egressHub) site(ctx context.Context, addr string, allow []string) error {
	h.mu.Lock()
	if sub := h.subs[addr]; sub == nil || sub.denied != nil {
		if sub != nil {
			close(sub.end)
		}
		h.subs[addr] = &egressSub{end: make(chan struct{})}
	}
	h.mu.Unlock()
	if err := h.call(ctx, egress.Command{Op: "site", Addr: addr, Allow: allow}); err != nil {
		return failed("cannot give the egress proxy the sandbox's rules: %v", err)
	}
	return nil
}

// drop ends the site at addr; the denials it printed before are delivered
// (they come before the reply), then its follower ends.
func (h *egressHub) drop(ctx context.Context, addr string) error {
	err := h.call(ctx, egress.Command{Op: "drop", Addr: addr})
	h.mu.Lock()
	if sub := h.subs[addr]; sub != nil {
		close(sub.end)
		delete(h.subs, addr)
	}
	h.mu.Unlock()
	if err != nil {
		return fmt.Errorf("cannot end the sandbox's rules on the egress proxy: %w", err)
	}
	return nil
}

// subscribe sends the denials of the site at addr to denied until the
// returned channel closes (the site dropped).
func (h *egressHub) subscribe(addr string, denied func(backend.EgressDenial)) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.subs[addr]; s != nil && s.denied == nil {
		// The site's denials so far, then the next ones.
		s.denied = denied
		for _, d := range s.pending {
			denied(d)
		}
		s.pending = nil
		return s.end
	}
	if old := h.subs[addr]; old != nil {
		close(old.end)
	}
	s := &egressSub{denied: denied, end: make(chan struct{})}
	h.subs[addr] = s
	return s.end
}

func (h *egressHub) unsubscribe(addr string, end chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.subs[addr]; s != nil && s.end == end {
		delete(h.subs, addr)
		close(end)
	}
}
