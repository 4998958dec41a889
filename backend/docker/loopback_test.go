package docker

import (
	"testing"
	"time"
)

// httpdOn is a service command that serves NAME at ADDR (httpd's -p: PORT or
// IP:PORT).
func httpdOn(name, addr string) string {
	return `["sh", "-c", "mkdir -p /www && echo ` + name + ` > /www/index.html && exec httpd -f -p ` + addr + ` -h /www"]`
}

// TestServiceSharesLoopback: a service whose ports keep their numbers runs in
// the sandbox's network namespace: the job reaches it on 127.0.0.1 with no
// relay between them (a server that listens on the loopback only is reached
// too), and by its name and aliases from the sandbox and from the other
// services. A service with loopback = "forwarded", or whose port is moved
// (LISTEN:PORT), keeps a namespace of its own: only its forwarded ports are on
// the sandbox's loopback, and it does not see the sandbox's.
func TestServiceSharesLoopback(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := testContext(t, 2*time.Minute)
	r := g.manifest(t.TempDir(), `
[sandbox]
image = "{{busybox}}"
ready_timeout = "20s"

[services.local]
image = "{{busybox}}"
command = `+httpdOn("local-only", "127.0.0.1:8081")+`
ports = ["8081"]
healthcheck = { cmd = ["wget", "-qO", "/dev/null", "http://127.0.0.1:8081/"], interval = "1s", retries = 100, start_period = "20s", start_interval = "100ms" }

[services.api]
image = "{{busybox}}"
command = `+httpdOn("api", "8082")+`
ports = ["127.0.0.1:8082:8082"]
aliases = ["api-alias"]

[services.iso]
image = "{{busybox}}"
command = ["sh", "-c", "mkdir -p /www && echo iso > /www/index.html && (wget -qO- http://127.0.0.1:8081/ || echo refused) > /www/seen.txt; httpd -p 127.0.0.1:8084 -h /www && exec httpd -f -p 8083 -h /www"]
ports = ["8083"]
loopback = "forwarded"
depends_on = { local = "service_healthy" }

[services.moved]
image = "{{busybox}}"
command = ["sh", "-c", "mkdir -p /www && echo moved > /www/index.html && until wget -qO /www/api.txt http://api:8082/; do sleep 0.05; done; exec httpd -f -p 8085 -h /www"]
ports = ["9085:8085"]
depends_on = ["api"]
`)
	if !r.Services["local"].SharesLoopback() || !r.Services["api"].SharesLoopback() || r.Services["iso"].SharesLoopback() || r.Services["moved"].SharesLoopback() {
		t.Fatalf("SharesLoopback: local %v, api %v, iso %v, moved %v; want true, true, false, false",
			r.Services["local"].SharesLoopback(), r.Services["api"].SharesLoopback(), r.Services["iso"].SharesLoopback(), r.Services["moved"].SharesLoopback())
	}
	// get URL prints the page or "refused".
	script := `get() { wget -qO- "$1" 2>/dev/null || echo refused; }
for i in $(seq 100); do wget -qO /dev/null http://127.0.0.1:8082/ 2>/dev/null && break; sleep 0.05; done
get http://127.0.0.1:8081/
get http://127.0.0.1:8082/
get http://api:8082/
get http://api-alias:8082/
get http://127.0.0.1:8083/
get http://127.0.0.1:8084/
for i in $(seq 100); do wget -qO /dev/null http://127.0.0.1:9085/ 2>/dev/null && break; sleep 0.05; done
get http://127.0.0.1:9085/
get http://127.0.0.1:8085/
get http://127.0.0.1:9085/api.txt
get http://127.0.0.1:8083/seen.txt`
	sb := g.create(ctx, r, "sh", "-c", script)
	code, stdout, stderr := g.run(ctx, sb)
	// The last two: what moved (a namespace of its own) got from api by its
	// name, and what iso (forwarded) found on its loopback's 8081.
	want := "local-only\napi\napi\napi\niso\nrefused\nmoved\nrefused\napi\nrefused\n"
	if code != 0 || stdout != want {
		t.Fatalf("exit %d, stdout:\n%s\nwant:\n%s\nstderr:\n%s", code, stdout, want, stderr)
	}
}
