//go:build projects

package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
	"golang.org/x/sys/unix"
)

// outsideServer runs a busybox httpd named name on net serving its own name, with
// port 8080 published on the host; it returns the host port.
func outsideServer(t *testing.T, e *env, net, name string) string {
	t.Helper()
	ctx := context.Background()
	c, err := e.Cli.ContainerCreate(ctx, &container.Config{
		Image: e.Image, Cmd: []string{"sh", "-c", "mkdir -p /www && echo page-of-" + name + " > /www/index.html && exec httpd -f -p 8080 -h /www"},
		ExposedPorts: nat.PortSet{"8080/tcp": {}},
	}, &container.HostConfig{NetworkMode: container.NetworkMode(net), PortBindings: nat.PortMap{"8080/tcp": {{HostIP: "0.0.0.0"}}}}, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })
	if err := e.Cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	ci, err := e.Cli.ContainerInspect(ctx, c.ID)
	if err != nil || len(ci.NetworkSettings.Ports["8080/tcp"]) == 0 {
		t.Fatalf("cannot find the published port of %s: %v", name, err)
	}
	return ci.NetworkSettings.Ports["8080/tcp"][0].HostPort
}

func containerIP(t *testing.T, e *env, name, net string) string {
	t.Helper()
	ci, err := e.Cli.ContainerInspect(context.Background(), name)
	if err != nil || ci.NetworkSettings.Networks[net] == nil {
		t.Fatalf("cannot find the address of %s on %s: %v", name, net, err)
	}
	return ci.NetworkSettings.Networks[net].IPAddress
}

// hostListeners listens on 0.0.0.0 of the host on n TCP ports (each answers
// an HTTP request with "host-page") and one UDP port (busybox's tftp is the
// client that sends it a datagram); it returns the ports and
// a function that counts what arrived (connections and datagrams).
func hostListeners(t *testing.T, n int) (tcpPorts []string, udpPort string, arrived func() int64) {
	t.Helper()
	var count atomic.Int64
	for range n {
		l, err := net.Listen("tcp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				count.Add(1)
				go func() {
					defer c.Close()
					_ = c.SetDeadline(time.Now().Add(5 * time.Second))
					_, _ = c.Read(make([]byte, 1024))
					_, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhost-page\n")
				}()
			}
		}()
		tcpPorts = append(tcpPorts, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	u, err := net.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := u.ReadFrom(buf); err != nil {
				return
			}
			count.Add(1)
		}
	}()
	return tcpPorts, strconv.Itoa(u.LocalAddr().(*net.UDPAddr).Port), count.Load
}

// labelWatch counts the IPv4 DNS packets (UDP or TCP to port 53), on every
// interface of the test's network namespace (the host's: its bridges and the
// host ends of every container's link), that carry label and whose destination is outside
// inside, a sandbox's subnet: a DNS query for a name holding label on its way
// to a resolver outside the sandbox, wherever it would go (the host's
// resolvers, any other). It needs CAP_NET_RAW (the tests run as root).
type labelWatch struct {
	fd    int
	label []byte
	mu    sync.Mutex
	dsts  []netip.Addr
	done  chan struct{}
}

func watchLabel(t *testing.T, label string) *labelWatch {
	t.Helper()
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		t.Fatalf("cannot watch the host's interfaces for DNS queries (the test needs CAP_NET_RAW: run it as root): %v", err)
	}
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	// Only DNS queries reach the socket: copying every packet of the host
	// (image layers, other tests' traffic) to this race-instrumented loop cost
	// the whole test run CPU.
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &dnsFilter); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	w := &labelWatch{fd: fd, label: []byte(label), done: make(chan struct{})}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		buf := make([]byte, 65536)
		for {
			select {
			case <-w.done:
				return
			default:
			}
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil || n < 14+20 || binary.BigEndian.Uint16(buf[12:14]) != 0x0800 {
				continue
			}
			if ip := buf[14:n]; bytes.Contains(ip, w.label) {
				w.mu.Lock()
				w.dsts = append(w.dsts, netip.AddrFrom4([4]byte(ip[16:20])))
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		w.stop()
		<-stopped
		unix.Close(fd)
	})
	return w
}

// dnsFilter is the classic BPF program of tcpdump's "ip and (udp or tcp) and
// dst port 53" on Ethernet frames: the packets labelWatch looks at.
var dnsFilter = func() unix.SockFprog {
	f := []unix.SockFilter{
		{Code: 0x28, K: 12},                   // 0: ldh [12] (EtherType)
		{Code: 0x15, Jt: 0, Jf: 9, K: 0x800},  // 1: IPv4, else drop
		{Code: 0x30, K: 23},                   // 2: ldb [23] (IP protocol)
		{Code: 0x15, Jt: 1, Jf: 0, K: 17},     // 3: UDP
		{Code: 0x15, Jt: 0, Jf: 6, K: 6},      // 4: TCP, else drop
		{Code: 0x28, K: 20},                   // 5: ldh [20] (fragment offset)
		{Code: 0x45, Jt: 4, Jf: 0, K: 0x1fff}, // 6: a later fragment: drop
		{Code: 0xb1, K: 14},                   // 7: ldxb 4*([14]&0xf) (IP header length)
		{Code: 0x48, K: 16},                   // 8: ldh [x+16] (destination port)
		{Code: 0x15, Jt: 0, Jf: 1, K: 53},     // 9: port 53
		{Code: 0x06, K: 262144},               // 10: accept
		{Code: 0x06, K: 0},                    // 11: drop
	}
	return unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
}()

func (w *labelWatch) stop() {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
}

// outside returns the destinations of the packets seen so far that are not in inside.
func (w *labelWatch) outside(inside netip.Prefix) []netip.Addr {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []netip.Addr
	for _, d := range w.dsts {
		if !inside.Contains(d) {
			out = append(out, d)
		}
	}
	return out
}

func (w *labelWatch) seen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.dsts)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// hostAddresses returns every IPv4 address of the host but loopback (the
// host's own, docker0's, every bridge's gateway).
func hostAddresses(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	return out
}

// TestEgress: one sandbox with [sandbox.egress] (an "outside" of two httpd
// containers on a user-defined network, the one named "ok" allowed, the other,
// "no", not; a daemon; a service) serves the checks of the allowlist and of the
// isolation, each a subtest, in its run, then in an up sandbox before and after a
// stop and a start; a sandbox without egress rules reaches both (through the
// host); nothing is left. (One egress sandbox for all the checks: each costs the
// Engine three containers and a network.)
func TestEgress(t *testing.T) {
	limit(t)
	skipOnPodman(t, "sandbox.egress is refused there (TestEgressRefusedOnPodman)")
	e := newEnv(t, "")
	ctx := context.Background()
	outside := uniq("airlock-test-outside")
	if _, err := e.Cli.NetworkCreate(ctx, outside, network.CreateOptions{Driver: "bridge"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Cli.NetworkRemove(context.Background(), outside) })
	ok, no := uniq("ok"), uniq("no")
	okPort := outsideServer(t, e, outside, ok)
	noPort := outsideServer(t, e, outside, no)
	okIP := containerIP(t, e, ok, outside)

	// Without [sandbox.egress] both are reachable, as before, through the host:
	// the gateway of airlock-shared, which this run makes when it is missing
	// (its address is among the host's that the isolation checks below target).
	t.Run("without-egress", func(t *testing.T) {
		plain := newEnv(t, plainManifest)
		p := plain.Run("run", "--", "sh", "-c", fmt.Sprintf(`GW=$(ip route | awk '/^default/ {print $3}')
echo "gateway=$GW"
wget -qO- http://$GW:%s/ && wget -qO- http://$GW:%s/`, okPort, noPort))
		if p.Code != 0 || strings.Contains(p.Stdout, "gateway=\n") {
			t.Fatalf("without egress rules: %s", p)
		}
		contains(t, "stdout", p.Stdout, "page-of-"+ok, "page-of-"+no)
		plain.assertClean()
	})

	tcpPorts, udpPort, arrived := hostListeners(t, 3)
	tcpPorts = append(tcpPorts, noPort) // a port published on 0.0.0.0 by another container
	// Every address of the host: its own, docker0's and every bridge's
	// gateway, airlock-shared's among them.
	targets := hostAddresses(t)
	exfil := uniq("exfil-test") + ".example"
	watch := watchLabel(t, strings.Split(exfil, ".")[0])

	e.WriteManifest(fmt.Sprintf(`
[sandbox]
image = "{{image}}"

[sandbox.egress]
allow = ["%s:8080"]
network = "%s"

[daemons.fetch]
command = ["sh", "-c", "wget -qO- http://%s:8080/ > /tmp/daemon-got; exec sleep 1000"]
ready = { cmd = ["test", "-s", "/tmp/daemon-got"], timeout = "20s" }

[services.side]
image = "{{image}}"
command = ["sh", "-c", "mkdir -p /www && echo page-of-side > /www/index.html && exec httpd -f -p 8080 -h /www"]
`, ok, outside, ok))
	// The allowlist: the allowed server by name, from the main command and the
	// daemon; the other denied (403); a direct connection bypassing the proxy.
	allowlist := fmt.Sprintf(`wget -qO- http://%s:8080/; echo "daemon: $(cat /tmp/daemon-got)"
if wget -qO- http://%s:8080/ 2>/tmp/err; then echo DENIED-REACHED; else echo "denied: $(cat /tmp/err)"; fi
if timeout 5 wget -Y off -qO- http://%s:8080/; then echo DIRECT-REACHED; else echo direct-blocked; fi
`, ok, no, okIP)
	// The isolation: every listener of the host on every address, TCP, UDP and
	// ARP; then the allowed server, the service, and names resolved.
	// (A current Engine gives an internal network no default route; its bridge
	// still has the gateway address the Engine chose, the subnet's first one.)
	isolation := fmt.Sprintf(`GW=$(ip route | awk '/^default/ {print $3}')
[ -n "$GW" ] || GW=$(ip route | awk '$2 == "dev" && $3 == "eth0" { split($1, a, "[./]"); print a[1] "." a[2] "." a[3] "." a[4] + 1; exit }')
echo "gateway=$GW"
echo "subnet=$(ip -4 addr show eth0 | awk '/inet / {print $2}')"
for h in $GW %s; do
  for p in %s; do
    (printf 'GET / HTTP/1.0\r\n\r\n' | timeout 5 nc $h $p 2>/dev/null | grep -q -e host-page -e page-of && echo "REACHED $h:$p") &
  done
  (timeout 3 tftp -g -r probe -l /tmp/probe-$h $h %s >/dev/null 2>&1) &
  (timeout 3 arping -c 1 -w 2 -I eth0 $h 2>&1 | grep -qi 'reply from' && echo "REACHED arp $h") &
done
wait
echo "allowed: $(wget -qO- http://%s:8080/)"
echo "service: $(wget -Y off -qO- http://side:8080/)"
for n in %s %s %s; do echo "lookup $n: $(timeout 8 nslookup $n 2>&1 | tr '\n' ' ')"; done
`, strings.Join(targets, " "), strings.Join(tcpPorts, " "), udpPort, ok, exfil, no, ok)
	start := time.Now()
	r := e.Run("run", "--", "sh", "-c", allowlist+isolation+"exit 3")
	t.Logf("run took %v", time.Since(start))
	if r.Code != 3 {
		t.Fatalf("run with egress rules: want exit 3, got %s", r)
	}

	// The main command and a daemon reach an allowed destination by name
	// through the proxy, a denied one gets 403 (and a summary line at the
	// end), direct connections bypassing the proxy fail.
	t.Run("allowlist", func(t *testing.T) {
		contains(t, "stdout", r.Stdout, "page-of-"+ok, "daemon: page-of-"+ok, "denied:", "403", "direct-blocked")
		if strings.Contains(r.Stdout, "-REACHED") {
			t.Errorf("a destination was reached that egress rules forbid:\n%s", r)
		}
		contains(t, "stderr", r.Stderr, "egress denied 1× to "+no+":8080")
	})

	// The main command reaches an allowed destination through the proxy and
	// nothing of the host: not a listener on 0.0.0.0 (several TCP ports, a UDP
	// port, a published port) through the internal network's gateway, docker0's
	// address, airlock-shared's gateway or any other address of the host, not
	// even an ARP reply (a raw frame of its own would reach the host); and names
	// outside the allowlist do not resolve (airlock's resolver answers NXDOMAIN
	// at once, an allowed name resolves, a service's name too).
	t.Run("isolation", func(t *testing.T) {
		if strings.Contains(r.Stdout, "gateway=\n") {
			t.Errorf("the main command has no default gateway to try:\n%s", r)
		}
		if strings.Contains(r.Stdout, "REACHED ") {
			t.Errorf("the host was reached around the egress proxy:\n%s", r)
		}
		if n := arrived(); n != 0 {
			t.Errorf("the host's listeners on 0.0.0.0 got %d connections or datagrams from the sandbox", n)
		}
		// Queries for the unlisted name: seen on the sandbox's network (to the
		// proxy's resolver), never on their way to a resolver outside it.
		var subnet netip.Prefix
		for _, l := range strings.Split(r.Stdout, "\n") {
			if v, found := strings.CutPrefix(l, "subnet="); found {
				if p, err := netip.ParsePrefix(v); err == nil {
					subnet = p.Masked()
				}
			}
		}
		if !subnet.IsValid() {
			t.Fatalf("the main command printed no subnet:\n%s", r)
		}
		if watch.seen() == 0 {
			t.Errorf("the watch saw no query for %s at all: it cannot tell whether one left", exfil)
		}
		if out := watch.outside(subnet); len(out) != 0 {
			t.Errorf("%d queries for %s left the sandbox's network %s, to %v", len(out), exfil, subnet, out)
		}
		contains(t, "stdout", r.Stdout, "allowed: page-of-"+ok, "service: page-of-side")
		lines := strings.Split(r.Stdout, "\n")
		lookup := func(name string) string {
			for _, l := range lines {
				if strings.HasPrefix(l, "lookup "+name+":") {
					return l
				}
			}
			return ""
		}
		for _, name := range []string{exfil, no} {
			if l := lookup(name); !strings.Contains(l, "NXDOMAIN") {
				t.Errorf("a name outside the allowlist: want NXDOMAIN from airlock's resolver, got %q", l)
			}
		}
		if l := lookup(ok); !strings.Contains(l, okIP) {
			t.Errorf("an allowed name: want it resolved to %s, got %q", okIP, l)
		}
	})

	// An exec in an up sandbox goes through the proxy too, and the denial is an
	// event; after a stop and a start, the proxy's resolver is still the one
	// the sandbox asks.
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	x := e.MustRun("exec", "--", "sh", "-c", "wget -qO- http://"+ok+":8080/; wget -qO- http://"+no+":8080/ || echo exec-denied")
	contains(t, "exec", x.Stdout, "page-of-"+ok, "exec-denied")
	eventually(t, cmdTimeout, "an egress.denied event", func() bool {
		return strings.Contains(e.MustRun("events", id).Stdout, "egress.denied")
	})
	e.MustRun("stop")
	e.MustRun("up", "-d")
	x = e.MustRun("exec", "--", "sh", "-c", fmt.Sprintf(
		"wget -qO- http://%s:8080/; wget -Y off -qO- http://side:8080/; nslookup %s 2>&1; nslookup %s 2>&1 || true", ok, ok, exfil))
	contains(t, "exec after a restart", x.Stdout, "page-of-"+ok, "page-of-side", okIP, "NXDOMAIN")
	e.MustRun("down")
	e.assertClean()
}

// TestEgressRefusedOnPodman: on Podman, whose networks lack what egress rules
// need, a sandbox with [sandbox.egress] fails before anything runs, naming the
// Engine and what it lacks, and leaves nothing behind.
func TestEgressRefusedOnPodman(t *testing.T) {
	limit(t)
	e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\n\n[sandbox.egress]\nallow = [\"allowed.example.org\"]\n")
	if !podmanEngine(t, e.Cli) {
		t.Skip("the Engine is not Podman")
	}
	e.startFails(cmdTimeout, "cannot apply sandbox.egress: the Engine (Podman ", "does not support it", "inhibit_ipv4")
}

// TestEgressAcrossDaemonRestart: the daemon's shared egress proxy outlives the
// daemon; the next daemon finds it by its name and uses it again (the same
// container, on the same network of the sandbox), the sandbox started again
// gets its rules back and its denials are recorded; its removal gives its
// network back to the park, and the daemon's stop removes the park.
func TestEgressAcrossDaemonRestart(t *testing.T) {
	limit(t)
	skipOnPodman(t, "sandbox.egress is refused there (TestEgressRefusedOnPodman)")
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[sandbox.egress]
allow = ["allowed.example.org"]
`)
	ctx := context.Background()
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	where := func() (netName, proxy string) {
		t.Helper()
		ci, err := e.Cli.ContainerInspect(ctx, "airlock-"+id)
		if err != nil {
			t.Fatal(err)
		}
		netName = string(ci.HostConfig.NetworkMode)
		n, err := e.Cli.NetworkInspect(ctx, netName, network.InspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range n.Containers {
			if strings.HasPrefix(ep.Name, "airlock.egress-") {
				if proxy != "" {
					t.Fatalf("two proxies on %s: %s, %s", netName, proxy, ep.Name)
				}
				proxy = ep.Name
			}
		}
		if proxy == "" {
			t.Fatalf("no egress proxy on the sandbox's network %s", netName)
		}
		return netName, proxy
	}
	denied := func(host string) {
		t.Helper()
		r := e.Run("exec", "--", "sh", "-c", "wget -q -O /dev/null http://"+host+"/ 2>&1; echo end")
		if !strings.Contains(r.Stdout, "403") {
			t.Fatalf("wget of %s: want 403, got %s", host, r)
		}
	}
	denied("before.denied.example")
	net1, proxy1 := where()

	e.MustRun("stop")
	e.StopDaemon()
	if ci, err := e.Cli.ContainerInspect(ctx, proxy1); err != nil || ci.State == nil || !ci.State.Running {
		t.Fatalf("the shared proxy did not outlive the daemon: %v", err)
	}
	e.MustRun("up", "-d")
	net2, proxy2 := where()
	if net2 != net1 || proxy2 != proxy1 {
		t.Fatalf("after the restart: network %s, proxy %s; want %s, %s (found again)", net2, proxy2, net1, proxy1)
	}
	denied("after.denied.example")
	deadline := time.Now().Add(15 * time.Second)
	for {
		found := false
		for _, ev := range e.jsonEvents(id) {
			found = found || (ev.Kind == "egress.denied" && ev.Extra["host"] == "after.denied.example")
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the denial after the restart was not recorded: %v", e.jsonEvents(id))
		}
		time.Sleep(200 * time.Millisecond)
	}

	e.MustRun("down")
	if n, err := e.Cli.NetworkInspect(ctx, net1, network.InspectOptions{}); err == nil {
		for _, ep := range n.Containers {
			if !strings.HasPrefix(ep.Name, "airlock.egress-") {
				t.Errorf("after down, %s is still on the sandbox's network %s", ep.Name, net1)
			}
		}
	}
	e.StopDaemon()
	if _, err := e.Cli.NetworkInspect(ctx, net1, network.InspectOptions{}); err == nil {
		t.Errorf("the daemon stopped and its parked network %s remains", net1)
	}
}
