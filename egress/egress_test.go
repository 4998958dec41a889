package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/test/testenv"
)

func TestParseRule(t *testing.T) {
	good := []struct {
		in   string
		want Rule
		str  string
	}{
		{"proxy.example.org", Rule{Host: "proxy.example.org"}, "proxy.example.org"},
		{"registry.internal:5000", Rule{Host: "registry.internal", Port: 5000}, "registry.internal:5000"},
		{"*.example.com", Rule{Host: "example.com", Wildcard: true}, "*.example.com"},
		{"*.Example.COM.:8443", Rule{Host: "example.com", Wildcard: true, Port: 8443}, "*.example.com:8443"},
		{"10.0.0.5:8080", Rule{Host: "10.0.0.5", Port: 8080}, "10.0.0.5:8080"},
		{"10.0.0.5", Rule{Host: "10.0.0.5"}, "10.0.0.5"},
		{"[::1]:443", Rule{Host: "::1", Port: 443}, "[::1]:443"},
		{"[::1]", Rule{Host: "::1"}, "::1"},
		{"::1", Rule{Host: "::1"}, "::1"},
		{"localhost", Rule{Host: "localhost"}, "localhost"},
		{"db", Rule{Host: "db"}, "db"},
		{"_acme.example.com", Rule{Host: "_acme.example.com"}, "_acme.example.com"},
		{"xn--exmple-cua.com", Rule{Host: "xn--exmple-cua.com"}, "xn--exmple-cua.com"},
		{"example.com:65535", Rule{Host: "example.com", Port: 65535}, "example.com:65535"},
	}
	for _, tc := range good {
		got, err := ParseRule(tc.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseRule(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		if got.String() != tc.str {
			t.Errorf("ParseRule(%q).String() = %q, want %q", tc.in, got.String(), tc.str)
		}
		// The canonical form parses to the same rule.
		if again, err := ParseRule(got.String()); err != nil || again != got {
			t.Errorf("ParseRule(%q) = %+v, %v; want %+v", got.String(), again, err, got)
		}
	}

	bad := []struct{ in, why string }{
		{"", "empty"},
		{"*.", "wildcard needs a domain"},
		{"*", "would allow everything"},
		{"a*.b", "first label"},
		{"*.*.example.com", "invalid character"},
		{"host:0", "1 to 65535"},
		{"host:99999", "1 to 65535"},
		{"host:", "missing port"},
		{"host:http", "invalid port"},
		{":80", "missing host"},
		{"http://x", "URL"},
		{"x/y", "paths"},
		{"example.com ", "spaces"},
		{" example.com", "spaces"},
		{"exa mple.com", "spaces"},
		{"exa\x00mple.com", "control"},
		{"ex\u00e4mple.com", "punycode"},
		{"example..com", "empty label"},
		{".example.com", "empty label"},
		{"*.10.0.0.5", "not an IP address"},
		{"10.1", "neither an IP address nor a host name"},
		{"010.0.0.5", "neither an IP address nor a host name"},
		{"[example.com]:80", "only for IPv6"},
		{"[::1", `missing "]"`},
		{"[::1]x", "unexpected"},
		{"::1:443:x", `too many ":"`},
		{"fe80::1%eth0", "zone"},
		{"exa!mple.com", "invalid character"},
		{strings.Repeat("a", 64) + ".com", "longer than 63"},
	}
	for _, tc := range bad {
		_, err := ParseRule(tc.in)
		if err == nil {
			t.Errorf("ParseRule(%q): no error", tc.in)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, strconv.Quote(tc.in)+": ") {
			t.Errorf("ParseRule(%q) error %q does not start with the entry", tc.in, msg)
		}
		if !strings.Contains(msg, tc.why) {
			t.Errorf("ParseRule(%q) error %q does not say %q", tc.in, msg, tc.why)
		}
	}
}

func TestParseRules(t *testing.T) {
	rules, err := ParseRules([]string{"proxy.example.org", "*.content.example.net", "registry.internal:5000"})
	if err != nil || len(rules) != 3 {
		t.Fatalf("ParseRules = %v, %v", rules, err)
	}
	if rules, err := ParseRules(nil); err != nil || len(rules) != 0 {
		t.Fatalf("ParseRules(nil) = %v, %v", rules, err)
	}
	_, err = ParseRules([]string{"ok.example", "*.", "also bad"})
	if err == nil || !strings.HasPrefix(err.Error(), `"*.": `) {
		t.Fatalf("ParseRules error = %v, want one naming \"*.\"", err)
	}
}

func mustRules(t *testing.T, entries ...string) []Rule {
	t.Helper()
	rules, err := ParseRules(entries)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

func TestAllowed(t *testing.T) {
	rules := mustRules(t, "proxy.example.org", "*.example.com", "registry.internal:5000", "10.0.0.5:8080", "[::1]:443", "192.168.1.1")
	cases := []struct {
		host string
		port int
		want bool
	}{
		// Exact names, default ports (80 for HTTP, 443 for CONNECT).
		{"proxy.example.org", 443, true},
		{"proxy.example.org", 80, true},
		{"proxy.example.org", 8080, false},
		{"sub.proxy.example.org", 443, false},
		{"golang.org", 443, false},
		// Case and trailing dot.
		{"PROXY.example.ORG", 443, true},
		{"proxy.example.org.", 443, true},
		// Wildcards: any depth below, never the bare domain.
		{"a.example.com", 443, true},
		{"a.b.c.example.com", 80, true},
		{"A.Example.Com.", 443, true},
		{"example.com", 443, false},
		{"badexample.com", 443, false},
		{"example.com.evil.org", 443, false},
		{"a.example.com", 8443, false},
		// Explicit ports allow only that port.
		{"registry.internal", 5000, true},
		{"registry.internal", 443, false},
		{"registry.internal", 80, false},
		// IP literals match exact rules only.
		{"10.0.0.5", 8080, true},
		{"10.0.0.5", 80, false},
		{"10.0.0.6", 8080, false},
		{"::1", 443, true},
		{"[::1]", 443, true},
		{"0:0:0:0:0:0:0:1", 443, true},
		{"::1", 80, false},
		{"192.168.1.1", 80, true},
		{"::ffff:192.168.1.1", 443, true},
		{"1.example.com", 443, true},
		// Malformed hosts and ports.
		{"", 443, false},
		{"010.0.0.5", 8080, false},
		{"a..example.com", 443, false},
		{"a example.com", 443, false},
		{"proxy.example.org", 0, false},
		{"proxy.example.org", 70000, false},
	}
	for _, tc := range cases {
		if got := Allowed(rules, tc.host, tc.port); got != tc.want {
			t.Errorf("Allowed(%q, %d) = %v, want %v", tc.host, tc.port, got, tc.want)
		}
	}
	if Allowed(nil, "proxy.example.org", 443) {
		t.Error("no rules allowed something")
	}
	// An IP address never matches a wildcard, even one that would cover its text.
	if Allowed(mustRules(t, "*.example.com"), "::ffff:1.2.3.4", 443) {
		t.Error("wildcard matched an IP address")
	}
}

// proxyFixture is a Server behind an httptest server, with its denials and
// dials recorded.
type proxyFixture struct {
	srv     *Server
	ts      *httptest.Server
	url     *url.URL
	dials   atomic.Int32
	mu      sync.Mutex
	denials []Denial
	logs    *testenv.SyncBuffer
}

func newProxy(t *testing.T, entries ...string) *proxyFixture {
	t.Helper()
	f := &proxyFixture{logs: &testenv.SyncBuffer{}}
	f.srv = &Server{
		Rules: mustRules(t, entries...),
		OnDenied: func(d Denial) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.denials = append(f.denials, d)
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			f.dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		ErrorLog: log.New(f.logs, "", 0),
	}
	f.ts = httptest.NewServer(f.srv)
	t.Cleanup(func() {
		f.ts.Close()
		f.srv.Close()
	})
	f.url, _ = url.Parse(f.ts.URL)
	return f
}

func (f *proxyFixture) client() *http.Client {
	return &http.Client{
		// No Accept-Encoding of its own, to see that the proxy adds none.
		Transport: &http.Transport{Proxy: http.ProxyURL(f.url), DisableKeepAlives: true, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
		Timeout: 10 * time.Second,
	}
}

func (f *proxyFixture) recorded() []Denial {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Denial(nil), f.denials...)
}

func hostPort(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func readBody(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestForwardAllowed(t *testing.T) {
	var seen http.Header
	var seenHost string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		seenHost = r.Host
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Upstream", "yes")
		w.Header().Set("Proxy-Agent", "upstream")
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprintf(w, "%s %s?%s body=%s", r.Method, r.URL.Path, r.URL.RawQuery, body)
	}))
	defer up.Close()
	p := newProxy(t, hostPort(t, up.URL))

	req, _ := http.NewRequest("POST", up.URL+"/path?a=1;b=2", strings.NewReader("hello"))
	req.Header.Set("X-End-To-End", "kept")
	req.Header.Set("X-Forwarded-For", "10.9.9.9")
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("Proxy-Custom", "dropped")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "dropped")
	res, err := p.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, res)
	if res.StatusCode != http.StatusTeapot || body != "POST /path?a=1;b=2 body=hello" {
		t.Fatalf("got %d %q", res.StatusCode, body)
	}
	if res.Header.Get("X-Upstream") != "yes" || res.Header.Get("Proxy-Agent") != "" {
		t.Errorf("response headers: %v", res.Header)
	}
	if seen.Get("X-End-To-End") != "kept" || seen.Get("X-Forwarded-For") != "10.9.9.9" {
		t.Errorf("end-to-end headers not forwarded as they were: %v", seen)
	}
	for _, k := range []string{"Proxy-Authorization", "Proxy-Custom", "Proxy-Connection", "X-Hop", "Accept-Encoding"} {
		if v, ok := seen[k]; ok {
			t.Errorf("upstream got %s: %v", k, v)
		}
	}
	if seenHost != hostPort(t, up.URL) {
		t.Errorf("upstream Host = %q", seenHost)
	}
	if d := p.recorded(); len(d) != 0 {
		t.Errorf("denials: %v", d)
	}
	if n := p.dials.Load(); n != 1 {
		t.Errorf("dials = %d, want 1", n)
	}
}

func TestForwardStreams(t *testing.T) {
	// The upstream sends its first chunk and waits for the client to have
	// read it: only a proxy that streams lets this finish.
	got := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			return
		}
		io.WriteString(w, "second\n")
	}))
	defer up.Close()
	p := newProxy(t, hostPort(t, up.URL))
	res, err := p.client().Get(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(got)
	if rest, _ := io.ReadAll(br); string(rest) != "second\n" {
		t.Fatalf("rest %q", rest)
	}
}

func TestForwardDenied(t *testing.T) {
	p := newProxy(t, "allowed.example")
	res, err := p.client().Get("http://Example.COM./x")
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, res)
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d, body %q", res.StatusCode, body)
	}
	want := `airlock: egress to example.com:80 is not allowed by this sandbox's manifest; add "example.com" (or "example.com:80") to sandbox.egress.allow`
	if strings.TrimSpace(body) != want {
		t.Errorf("body %q\nwant %q", body, want)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
	if d := p.recorded(); len(d) != 1 || d[0] != (Denial{Host: "example.com", Port: 80, Method: "GET"}) {
		t.Errorf("denials %v", d)
	}
	if n := p.dials.Load(); n != 0 {
		t.Errorf("dials = %d, want 0", n)
	}

	// A port other than the defaults is suggested alone.
	res, err = p.client().Get("http://allowed.example:8080/")
	if err != nil {
		t.Fatal(err)
	}
	body = readBody(t, res)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, `add "allowed.example:8080" to sandbox.egress.allow`) {
		t.Errorf("got %d %q", res.StatusCode, body)
	}
}

func TestForwardRedirectNotFollowed(t *testing.T) {
	var other atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/other" {
			other.Add(1)
			return
		}
		http.Redirect(w, r, "/other", http.StatusFound)
	}))
	defer up.Close()
	p := newProxy(t, hostPort(t, up.URL))
	res, err := p.client().Get(up.URL + "/start")
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, res)
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/other" {
		t.Errorf("got %d Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	if n := other.Load(); n != 0 {
		t.Errorf("the proxy followed the redirect (%d)", n)
	}
}

func TestOriginFormRequest(t *testing.T) {
	p := newProxy(t, "example.com")
	res, err := http.Get(p.ts.URL + "/some/path")
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, res)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "forwards only proxied requests") {
		t.Errorf("got %d %q", res.StatusCode, body)
	}
	if len(p.recorded()) != 0 || p.dials.Load() != 0 {
		t.Error("an origin-form request was denied or dialled")
	}
}

// rawRequest sends a request line and headers to the proxy as they are and
// returns the connection and the parsed response.
func rawRequest(t *testing.T, proxy *url.URL, head string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", proxy.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, br, res
}

func TestBadRequests(t *testing.T) {
	p := newProxy(t, "example.com")
	cases := []struct{ head, want string }{
		{"GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", "CONNECT"},
		{"GET ftp://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", "only http://"},
		{"GET http://010.0.0.5/ HTTP/1.1\r\nHost: x\r\n\r\n", "invalid destination host"},
		{"CONNECT example.com:0 HTTP/1.1\r\nHost: example.com:0\r\n\r\n", "invalid destination port"},
		{"CONNECT example.com: HTTP/1.1\r\nHost: example.com\r\n\r\n", "invalid destination port"},
	}
	for _, tc := range cases {
		_, _, res := rawRequest(t, p.url, tc.head)
		body := readBody(t, res)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%q: got %d %q, want 400 with %q", tc.head, res.StatusCode, body, tc.want)
		}
	}
	if len(p.recorded()) != 0 || p.dials.Load() != 0 {
		t.Errorf("denials %v, dials %d", p.recorded(), p.dials.Load())
	}
}

func TestForwardUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	p := newProxy(t, addr)
	res, err := p.client().Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, res)
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(body, "could not reach "+addr) {
		t.Errorf("got %d %q", res.StatusCode, body)
	}
	if len(p.recorded()) != 0 {
		t.Errorf("denials %v", p.recorded())
	}
}

func TestConnectAllowed(t *testing.T) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "secret over %s", r.Proto)
	}))
	defer up.Close()
	p := newProxy(t, hostPort(t, up.URL))
	client := up.Client()
	client.Transport.(*http.Transport).Proxy = http.ProxyURL(p.url)
	res, err := client.Get(up.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, res)
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(body, "secret over HTTP/") {
		t.Errorf("got %d %q", res.StatusCode, body)
	}
	if n := p.dials.Load(); n != 1 {
		t.Errorf("dials = %d, want 1", n)
	}
	if len(p.recorded()) != 0 {
		t.Errorf("denials %v", p.recorded())
	}
}

func TestConnectDenied(t *testing.T) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	p := newProxy(t, "other.example:443")
	client := up.Client()
	client.Transport.(*http.Transport).Proxy = http.ProxyURL(p.url)
	_, err := client.Get(up.URL + "/")
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("client error = %v, want a 403 from the proxy", err)
	}

	// The same as a raw request, to read the body.
	_, _, res := rawRequest(t, p.url, "CONNECT Example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
	body := readBody(t, res)
	want := `airlock: egress to example.com:443 is not allowed by this sandbox's manifest; add "example.com" (or "example.com:443") to sandbox.egress.allow`
	if res.StatusCode != http.StatusForbidden || strings.TrimSpace(body) != want {
		t.Errorf("got %d %q\nwant 403 %q", res.StatusCode, body, want)
	}
	if n := p.dials.Load(); n != 0 {
		t.Errorf("dials = %d, want 0", n)
	}
	d := p.recorded()
	upHost, upPort, _ := net.SplitHostPort(hostPort(t, up.URL))
	port, _ := strconv.Atoi(upPort)
	if len(d) != 2 || d[0] != (Denial{Host: upHost, Port: port, Method: "CONNECT"}) || d[1] != (Denial{Host: "example.com", Port: 443, Method: "CONNECT"}) {
		t.Errorf("denials %v", d)
	}
}

func TestConnectDefaultPort(t *testing.T) {
	p := newProxy(t, "example.com:8443")
	_, _, res := rawRequest(t, p.url, "CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n")
	readBody(t, res)
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("status %d", res.StatusCode)
	}
	if d := p.recorded(); len(d) != 1 || d[0].Port != 443 {
		t.Errorf("denials %v, want port 443", d)
	}
}

// echoServer accepts TCP connections and echoes what it reads; it reports each
// connection's end of stream on the returned channel.
func echoServer(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	eof := make(chan struct{}, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
				eof <- struct{}{}
			}()
		}
	}()
	return l.Addr().String(), eof
}

func TestConnectTunnel(t *testing.T) {
	addr, eof := echoServer(t)
	p := newProxy(t, addr)
	// The first bytes of the tunnel come in the same write as the request.
	c, br, res := rawRequest(t, p.url, "CONNECT "+addr+" HTTP/1.1\r\nHost: "+addr+"\r\n\r\nearly ")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	io.WriteString(c, "late\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "early late\n" {
		t.Fatalf("echo %q, %v", line, err)
	}
	// An idle tunnel stays open.
	time.Sleep(200 * time.Millisecond)
	io.WriteString(c, "again\n")
	if line, err := br.ReadString('\n'); err != nil || line != "again\n" {
		t.Fatalf("echo after idle %q, %v", line, err)
	}
	// A half close reaches the destination and its answer still comes back.
	c.(*net.TCPConn).CloseWrite()
	select {
	case <-eof:
	case <-time.After(5 * time.Second):
		t.Fatal("the destination did not see the end of stream")
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after close: %q, %v", rest, err)
	}
	waitTunnels(t, p.srv, 0)
}

func waitTunnels(t *testing.T, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.tunnelCount() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d tunnels open, want %d", s.tunnelCount(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConnectUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := newProxy(t, addr)
	_, _, res := rawRequest(t, p.url, "CONNECT "+addr+" HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	body := readBody(t, res)
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(body, "could not reach "+addr) {
		t.Errorf("got %d %q", res.StatusCode, body)
	}
	if !strings.Contains(p.logs.String(), addr) {
		t.Errorf("nothing logged: %q", p.logs.String())
	}
}

func TestServeAndClose(t *testing.T) {
	addr, _ := echoServer(t)
	srv := &Server{Rules: mustRules(t, addr), ErrorLog: log.New(io.Discard, "", 0)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	proxyURL := &url.URL{Scheme: "http", Host: l.Addr().String()}

	// A header larger than the limit is refused.
	_, _, res := rawRequest(t, proxyURL, "GET http://"+addr+"/ HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", MaxHeaderBytes+4096)+"\r\n\r\n")
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("large header: status %d", res.StatusCode)
	}

	// An open tunnel is closed by Close, and Serve returns.
	c, br, res := rawRequest(t, proxyURL, "CONNECT "+addr+" HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	waitTunnels(t, srv, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with an open tunnel = %v, want the deadline", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("tunnel read after Shutdown: %v, want EOF", err)
	}
	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
		t.Error("the listener is still open")
	}
}

func TestZeroServerDeniesAll(t *testing.T) {
	var s Server
	req := httptest.NewRequest("CONNECT", "http://proxy.example.org:443", nil)
	req.URL = &url.URL{Host: "proxy.example.org:443"}
	req.Host = "proxy.example.org:443"
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	if w.Code != http.StatusForbidden {
		t.Errorf("status %d", w.Code)
	}
}
