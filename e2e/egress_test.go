package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"

	"github.com/airlock-dev/airlock/sandbox"
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

// TestEgressAllowlist: with [sandbox.egress] the main command, a daemon and an
// exec reach an allowed destination by name through the proxy, a denied one gets
// 403 (an event, and a summary line at the end), direct connections bypassing the
// proxy fail; without it a sandbox reaches both as before; nothing is left.
func TestEgressAllowlist(t *testing.T) {
	limit(t)
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

	e.WriteManifest(fmt.Sprintf(`
[sandbox]
image = "{{image}}"

[sandbox.egress]
allow = ["%s:8080"]
network = "%s"

[daemons.fetch]
command = ["sh", "-c", "wget -qO- http://%s:8080/ > /tmp/daemon-got; exec sleep 1000"]
ready = { cmd = ["test", "-s", "/tmp/daemon-got"], timeout = "20s" }
`, ok, outside, ok))
	script := fmt.Sprintf(`wget -qO- http://%s:8080/; echo "daemon: $(cat /tmp/daemon-got)"
if wget -qO- http://%s:8080/ 2>/tmp/err; then echo DENIED-REACHED; else echo "denied: $(cat /tmp/err)"; fi
if timeout 5 wget -Y off -qO- http://%s:8080/; then echo DIRECT-REACHED; else echo direct-blocked; fi
exit 3`, ok, no, okIP)
	r := e.Run("run", "--", "sh", "-c", script)
	if r.Code != 3 {
		t.Fatalf("run with egress rules: want exit 3, got %s", r)
	}
	contains(t, "stdout", r.Stdout, "page-of-"+ok, "daemon: page-of-"+ok, "denied:", "403", "direct-blocked")
	if strings.Contains(r.Stdout, "REACHED") {
		t.Errorf("a destination was reached that egress rules forbid:\n%s", r)
	}
	contains(t, "stderr", r.Stderr, "egress denied 1× to "+no+":8080")

	// exec in an up sandbox goes through the proxy too; the denial is an event.
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	x := e.MustRun("exec", "--", "sh", "-c", "wget -qO- http://"+ok+":8080/; wget -qO- http://"+no+":8080/ || echo exec-denied")
	contains(t, "exec", x.Stdout, "page-of-"+ok, "exec-denied")
	eventually(t, cmdTimeout, "an egress.denied event", func() bool {
		return strings.Contains(e.MustRun("events", id).Stdout, "egress.denied")
	})
	e.MustRun("down")
	e.assertClean()

	// Without [sandbox.egress] both are reachable, as before (through the host).
	plain := newEnv(t, plainManifest)
	gw := sharedGateway(t, plain)
	p := plain.Run("run", "--", "sh", "-c", fmt.Sprintf("wget -qO- http://%s:%s/ && wget -qO- http://%s:%s/", gw, okPort, gw, noPort))
	if p.Code != 0 {
		t.Fatalf("without egress rules: %s", p)
	}
	contains(t, "stdout", p.Stdout, "page-of-"+ok, "page-of-"+no)
	plain.assertClean()
}

func containerIP(t *testing.T, e *env, name, net string) string {
	t.Helper()
	ci, err := e.Cli.ContainerInspect(context.Background(), name)
	if err != nil || ci.NetworkSettings.Networks[net] == nil {
		t.Fatalf("cannot find the address of %s on %s: %v", name, net, err)
	}
	return ci.NetworkSettings.Networks[net].IPAddress
}

// sharedGateway makes sure the shared network exists (a run creates it) and
// returns its gateway, an address of the host.
func sharedGateway(t *testing.T, e *env) string {
	t.Helper()
	e.MustRun("run", "--", "true")
	n, err := e.Cli.NetworkInspect(context.Background(), sandbox.SharedNetwork, network.InspectOptions{})
	if err != nil || len(n.IPAM.Config) == 0 {
		t.Fatalf("cannot inspect %s: %v", sandbox.SharedNetwork, err)
	}
	return n.IPAM.Config[0].Gateway
}
