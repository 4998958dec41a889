package control_test

// The TCP listener against browsers and other local users (issue 39): a
// token-less listener only behind an explicitly unsafe flag that warns at every
// start; on every TCP request a body that is not JSON (the archive uploads
// aside), any Origin header and a Host that is not the listen address are
// refused.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// tcpDo sends method url with the token, the headers (Host among them: the
// request's Host) and body, and returns the status and the decoded error
// reason ("" for none).
func tcpDo(t *testing.T, method, url, token string, hdr map[string]string, body string) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctxT(t, 20*time.Second), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var ce struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(b, &ce)
	return resp.StatusCode, ce.Reason, string(b)
}

// TestTCPRefusesBrowserRequests: what a web page can make a browser send —
// a body that is not JSON, an Origin header, a Host of the attacker's name
// (DNS rebinding) — is refused on TCP even with the token, each header on its
// own; the archive uploads take their media types and still need the token;
// the listen address as Host (and localhost on loopback) is served.
func TestTCPRefusesBrowserRequests(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	tokenFile := filepath.Join(e.home, "token")
	const token = "guard-token-41c2"
	writeTokenFile(t, tokenFile, token, 0o600)
	port := freePort(t)
	d := e.startDaemon(binA, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--token-file", tokenFile)
	waitTCP(t, port)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	// The attack of the issue: all three at once, on a create.
	wm, _ := e.wire()
	create, _ := json.Marshal(&client.CreateRequest{ID: "csrf-probe", Kind: "up", Manifest: wm, Start: true})
	code, reason, body := tcpDo(t, "POST", base+"/v1/sandboxes", token,
		map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example", "Host": "rebind.evil.example:" + strconv.Itoa(port)}, string(create))
	if code != http.StatusForbidden || reason != "forbidden" {
		t.Errorf("a create with text/plain, an Origin and a foreign Host: %d %s, want 403 forbidden", code, body)
	}
	if _, err := d.client.Get(ctxT(t, 5*time.Second), "csrf-probe"); apiReason(err) != client.ReasonSandboxNotFound {
		t.Errorf("the refused create made a sandbox (%v)", err)
	}

	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		body               string
		code               int
		reason             string
	}{
		{"a text/plain body", "POST", "/v1/sandboxes/nope/stop", map[string]string{"Content-Type": "text/plain"}, "{}", 400, "invalid_request"},
		{"a form body", "POST", "/v1/sandboxes", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "a=b", 400, "invalid_request"},
		{"a body without a Content-Type", "POST", "/v1/sandboxes/nope/stop", nil, "{}", 400, "invalid_request"},
		{"a tar body on a JSON route", "POST", "/v1/sandboxes/nope/stop", map[string]string{"Content-Type": "application/x-tar"}, "x", 400, "invalid_request"},
		{"an Origin", "GET", "/v1/sandboxes", map[string]string{"Origin": "https://evil.example"}, "", 403, "forbidden"},
		{"an Origin of the listen address", "GET", "/v1/health", map[string]string{"Origin": base}, "", 403, "forbidden"},
		{"Origin: null", "GET", "/v1/health", map[string]string{"Origin": "null"}, "", 403, "forbidden"},
		{"a rebound Host", "GET", "/v1/sandboxes", map[string]string{"Host": "rebind.evil.example:" + strconv.Itoa(port)}, "", 403, "forbidden"},
		{"a Host without the port", "GET", "/v1/health", map[string]string{"Host": "127.0.0.1"}, "", 403, "forbidden"},
		{"a Host of another port", "GET", "/v1/health", map[string]string{"Host": "127.0.0.1:1"}, "", 403, "forbidden"},
		// Served.
		{"the listen address", "GET", "/v1/sandboxes", map[string]string{"Host": addr}, "", 200, ""},
		{"localhost", "GET", "/v1/health", map[string]string{"Host": "localhost:" + strconv.Itoa(port)}, "", 200, ""},
		{"a JSON body", "POST", "/v1/sandboxes/nope/stop", map[string]string{"Content-Type": "application/json; charset=utf-8"}, "{}", 404, "sandbox_not_found"},
		{"an archive upload", "PUT", "/v1/sandboxes/nope/files?path=/tmp", map[string]string{"Content-Type": "application/x-tar"}, "x", 404, "sandbox_not_found"},
		{"a file upload", "PUT", "/v1/sandboxes/nope/files?path=/tmp/f", map[string]string{"Content-Type": "application/octet-stream"}, "x", 404, "sandbox_not_found"},
	} {
		code, reason, body := tcpDo(t, tc.method, base+tc.path, token, tc.hdr, tc.body)
		if code != tc.code || reason != tc.reason {
			t.Errorf("%s: %s %s: %d %s, want %d %q", tc.name, tc.method, tc.path, code, body, tc.code, tc.reason)
		}
	}
	// An upload still needs the token.
	if code, reason, body := tcpDo(t, "PUT", base+"/v1/sandboxes/nope/files?path=/tmp", "", map[string]string{"Content-Type": "application/x-tar"}, "x"); code != 401 || reason != "unauthorized" {
		t.Errorf("an archive upload without the token: %d %s, want 401", code, body)
	}
	// The Unix socket is the user's alone: nothing of this applies there.
	if _, err := d.client.List(ctxT(t, 5*time.Second), nil); err != nil {
		t.Errorf("the Unix socket: %v", err)
	}
}

// TestTCPWithoutTokenIsUnsafe: --no-token is refused on TCP, saying why and
// what to give instead; --unsafe-no-token starts a token-less listener with a
// warning at every start (on stderr and in the log), and even then refuses
// what a browser sends.
func TestTCPWithoutTokenIsUnsafe(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.stopBackgroundDaemon()
	for _, verb := range []string{"run", "start"} {
		r := e.run(binA, "daemon", verb, "--host", "127.0.0.1", "--port", strconv.Itoa(freePort(t)), "--no-token")
		if r.Code != 2 || !strings.Contains(r.Stderr, "--token-file") || !strings.Contains(r.Stderr, "every local user") {
			t.Errorf("daemon %s --no-token: %s; want exit 2 naming the risk and --token-file", verb, r)
		}
	}
	if _, err := client.New(e.paths.Socket()).Health(context.Background()); err == nil {
		t.Fatalf("a daemon started with --no-token")
	}

	port := freePort(t)
	r := e.run(binA, "daemon", "start", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--unsafe-no-token")
	const warning = "warning: the TCP listener on 127.0.0.1:"
	if r.Code != 0 || !strings.Contains(r.Stderr, warning) || !strings.Contains(r.Stderr, "every local user") {
		t.Fatalf("daemon start --unsafe-no-token: %s; want a warning", r)
	}
	waitTCP(t, port)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if code, _, body := tcpDo(t, "GET", base+"/v1/sandboxes", "", nil, ""); code != 200 || strings.TrimSpace(body) != "[]" {
		t.Errorf("a token-less listener without a token: %d %s", code, body)
	}
	for name, hdr := range map[string]map[string]string{
		"an Origin":         {"Origin": "https://evil.example"},
		"a rebound Host":    {"Host": "rebind.evil.example:" + strconv.Itoa(port)},
		"a text/plain body": {"Content-Type": "text/plain"},
	} {
		if code, _, body := tcpDo(t, "POST", base+"/v1/sandboxes/nope/stop", "", hdr, "{}"); code != 403 && code != 400 {
			t.Errorf("token-less, %s: %d %s, want a refusal", name, code, body)
		}
	}
	// Every start warns: a restart by a CLI of another build too.
	first := e.health()
	r = e.run(binB, "daemon", "start")
	if r.Code != 0 || !strings.Contains(r.Stderr, warning) {
		t.Errorf("the token-less daemon replaced by another build: %s; want the warning again", r)
	}
	if second := e.health(); second.PID == first.PID {
		t.Errorf("the daemon was not replaced")
	}
	waitTCP(t, port)
	if b, _ := os.ReadFile(filepathLog(e)); strings.Count(string(b), "without a token") < 2 {
		t.Errorf("the log does not warn at each start:\n%s", b)
	}
}

func filepathLog(e *env) string { return filepath.Join(e.paths.DaemonDir(), "airlockd.log") }
