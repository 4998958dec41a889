// Package egress is the sandbox's egress proxy: it forwards HTTP and HTTPS (CONNECT) only to allowed destinations.
//
// It is built on the standard library rather than github.com/elazarl/goproxy:
// net/http parses requests and bounds headers, httputil.ReverseProxy forwards
// absolute-URI requests (hop-by-hop headers, streaming, trailers, 1xx,
// upgrades) and CONNECT is a hijack and two copies. goproxy would add a module
// and its own logging, handler chain and MITM machinery for no behaviour we need;
// the few hundred lines here are the whole policy, easy to read and to audit.
package egress

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultPort is the port the proxy listens on unless told otherwise.
const DefaultPort = 3128

// AllowKey is the manifest key a denial tells the user to change.
const AllowKey = "sandbox.egress.allow"

// Limits of what the proxy holds for a client.
const (
	// DialTimeout bounds a connection to a destination with the default Dial.
	DialTimeout = 10 * time.Second
	// ReadHeaderTimeout bounds the reading of a request's header.
	ReadHeaderTimeout = 30 * time.Second
	// IdleTimeout closes a client's keep-alive connection idle between requests
	// (not a CONNECT tunnel: those may stay idle, as during a long download).
	IdleTimeout = 2 * time.Minute
	// MaxHeaderBytes bounds a request's header (larger ones get 431).
	MaxHeaderBytes = 256 << 10
	// maxResponseHeaderBytes bounds a destination's response header.
	maxResponseHeaderBytes = 1 << 20
)

// Denial is one request the rules denied.
type Denial struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Method string `json:"method"`
}

// Server is the egress proxy. Set its fields before the first request and do
// not change them afterwards; the zero value denies everything.
type Server struct {
	// Rules are the allowed destinations.
	Rules []Rule
	// OnDenied, if set, is called once per denied request, before the 403 is
	// written; it may be called from several goroutines at once.
	OnDenied func(Denial)
	// Dial connects to a destination ("tcp", "host:port"); nil means a
	// net.Dialer with a DialTimeout timeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ErrorLog receives the proxy's errors (failed destinations, broken
	// connections); nil means the log package's standard logger.
	ErrorLog *log.Logger

	once      sync.Once
	transport *http.Transport
	forward   *httputil.ReverseProxy
	hs        *http.Server

	mu      sync.Mutex
	tunnels map[net.Conn]struct{}
}

func (s *Server) init() {
	s.once.Do(func() {
		s.transport = &http.Transport{
			Proxy:                  nil,
			DialContext:            s.dialChecked,
			MaxIdleConns:           100,
			IdleConnTimeout:        90 * time.Second,
			ExpectContinueTimeout:  time.Second,
			MaxResponseHeaderBytes: maxResponseHeaderBytes,
			// Pass bodies as they are: no Accept-Encoding added, nothing decoded.
			DisableCompression: true,
		}
		s.forward = &httputil.ReverseProxy{
			Rewrite:        rewrite,
			Transport:      s.transport,
			FlushInterval:  -1,
			ErrorLog:       s.ErrorLog,
			ModifyResponse: stripProxyHeadersResponse,
			ErrorHandler:   s.forwardError,
		}
		s.hs = &http.Server{
			Handler:           s,
			ReadHeaderTimeout: ReadHeaderTimeout,
			IdleTimeout:       IdleTimeout,
			MaxHeaderBytes:    MaxHeaderBytes,
			ErrorLog:          s.ErrorLog,
		}
		s.tunnels = make(map[net.Conn]struct{})
	})
}

// Serve accepts proxy connections on l until Shutdown or Close, after which it
// returns http.ErrServerClosed. It may be called for several listeners.
func (s *Server) Serve(l net.Listener) error {
	s.init()
	return s.hs.Serve(l)
}

// Shutdown stops accepting connections, waits until in-flight requests and
// tunnels are done or ctx ends, then closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	err := s.hs.Shutdown(ctx)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for s.tunnelCount() > 0 && err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-tick.C:
		}
	}
	s.closeTunnels()
	s.transport.CloseIdleConnections()
	return err
}

// Close closes the listeners, the connections and the tunnels at once.
func (s *Server) Close() error {
	s.init()
	err := s.hs.Close()
	s.closeTunnels()
	s.transport.CloseIdleConnections()
	return err
}

// ServeHTTP handles one proxy request: CONNECT host:port, or a request with an
// absolute http:// URI.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.init()
	if r.Method == http.MethodConnect {
		s.serveConnect(w, r)
		return
	}
	s.serveForward(w, r)
}

func (s *Server) serveForward(w http.ResponseWriter, r *http.Request) {
	if r.URL.Host == "" || r.URL.Scheme == "" {
		http.Error(w, "airlock: this is the sandbox's egress proxy; it forwards only proxied requests "+
			"(an absolute URI such as \"GET http://host/path\", or \"CONNECT host:443\"): "+
			"point HTTP_PROXY/HTTPS_PROXY at it instead of sending it requests of its own", http.StatusBadRequest)
		return
	}
	if !strings.EqualFold(r.URL.Scheme, "http") {
		http.Error(w, fmt.Sprintf("airlock: the egress proxy forwards only http:// URLs as requests, not %s://; "+
			"for https it opens a tunnel with CONNECT (set HTTPS_PROXY)", r.URL.Scheme), http.StatusBadRequest)
		return
	}
	if _, _, ok := s.admit(w, r, 80); !ok {
		return
	}
	s.forward.ServeHTTP(w, r)
}

// rewrite turns the client's request into the one sent on: the same URL,
// method, body and end-to-end headers (ReverseProxy has removed the hop-by-hop
// ones), and none of the proxy's own.
func rewrite(pr *httputil.ProxyRequest) {
	pr.Out.Host = "" // the URI's authority, not a Host header that may differ
	pr.Out.URL.RawQuery = pr.In.URL.RawQuery
	for _, k := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		if v, ok := pr.In.Header[k]; ok {
			pr.Out.Header[k] = v
		}
	}
	stripProxyHeaders(pr.Out.Header)
}

func stripProxyHeadersResponse(res *http.Response) error {
	stripProxyHeaders(res.Header)
	return nil
}

func stripProxyHeaders(h http.Header) {
	for k := range h {
		if len(k) >= 6 && strings.EqualFold(k[:6], "proxy-") {
			delete(h, k)
		}
	}
}

func (s *Server) forwardError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client went away
	}
	dest := r.URL.Host
	if r.URL.Port() == "" {
		dest = net.JoinHostPort(r.URL.Hostname(), "80")
	}
	s.logf("egress proxy: %s %s: %v", r.Method, dest, err)
	http.Error(w, fmt.Sprintf("airlock: the egress proxy could not reach %s: %v", dest, err), http.StatusBadGateway)
}

func (s *Server) serveConnect(w http.ResponseWriter, r *http.Request) {
	_, port, ok := s.admit(w, r, 443)
	if !ok {
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "airlock: the egress proxy cannot open a tunnel on this connection (HTTP/1.1 only)", http.StatusBadRequest)
		return
	}
	addr := net.JoinHostPort(r.URL.Hostname(), strconv.Itoa(port))
	up, err := s.dial(r.Context(), "tcp", addr)
	if err != nil {
		s.logf("egress proxy: CONNECT %s: %v", addr, err)
		http.Error(w, fmt.Sprintf("airlock: the egress proxy could not reach %s: %v", addr, err), http.StatusBadGateway)
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		s.logf("egress proxy: CONNECT %s: %v", addr, err)
		return
	}
	_ = conn.SetDeadline(time.Time{}) // tunnels may stay idle
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		up.Close()
		return
	}
	// Bytes the client sent after the request, before our answer.
	if n := brw.Reader.Buffered(); n > 0 {
		early, _ := brw.Reader.Peek(n)
		if _, err := up.Write(early); err != nil {
			conn.Close()
			up.Close()
			return
		}
	}
	s.tunnel(conn, up)
}

// tunnel copies both ways until both sides are done; an end of stream is
// passed on as a half close so the other direction may go on.
func (s *Server) tunnel(client, up net.Conn) {
	if !s.track(client, up) {
		client.Close()
		up.Close()
		return
	}
	defer s.untrack(client, up)
	// pass copies one direction; at its end of stream it half-closes dst so
	// the other direction may go on; on an error it closes both sides.
	pass := func(dst, src net.Conn) {
		if _, err := io.Copy(dst, src); err != nil {
			client.Close()
			up.Close()
			return
		}
		closeWrite(dst)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pass(up, client)
	}()
	pass(client, up)
	<-done
	client.Close()
	up.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	c.Close()
}

func (s *Server) track(cs ...net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tunnels == nil {
		return false // closed
	}
	for _, c := range cs {
		s.tunnels[c] = struct{}{}
	}
	return true
}

func (s *Server) untrack(cs ...net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		delete(s.tunnels, c)
	}
}

func (s *Server) tunnelCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tunnels)
}

// closeTunnels closes the open tunnels; new ones are refused from then on.
func (s *Server) closeTunnels() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.tunnels {
		c.Close()
	}
	s.tunnels = nil
}

// admit returns the destination of a request when the rules allow it;
// otherwise it answered the request (400, or the denial) and ok is false.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, defaultPort int) (host string, port int, ok bool) {
	host, port, ok = s.destination(w, r, defaultPort)
	if ok && !Allowed(s.Rules, host, port) {
		s.deny(w, r, host, port)
		return "", 0, false
	}
	return host, port, ok
}

// destination returns the normalized host and the port of a request's
// authority, or answers 400 and returns false.
func (s *Server) destination(w http.ResponseWriter, r *http.Request, defaultPort int) (string, int, bool) {
	authority := r.URL.Host
	if authority == "" {
		http.Error(w, "airlock: the egress proxy needs a destination: CONNECT host:port", http.StatusBadRequest)
		return "", 0, false
	}
	host, port := r.URL.Hostname(), defaultPort
	if p := r.URL.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			http.Error(w, fmt.Sprintf("airlock: invalid destination port in %q", authority), http.StatusBadRequest)
			return "", 0, false
		}
		port = n
	} else if strings.HasSuffix(authority, ":") {
		http.Error(w, fmt.Sprintf("airlock: invalid destination port in %q", authority), http.StatusBadRequest)
		return "", 0, false
	}
	h, _, err := normalizeHost(host)
	if err != nil {
		http.Error(w, fmt.Sprintf("airlock: invalid destination host %q: %v", host, err), http.StatusBadRequest)
		return "", 0, false
	}
	return h, port, true
}

func (s *Server) deny(w http.ResponseWriter, r *http.Request, host string, port int) {
	if s.OnDenied != nil {
		s.OnDenied(Denial{Host: host, Port: port, Method: r.Method})
	}
	dest := joinHostPort(host, port)
	suggest := fmt.Sprintf("%q", dest)
	if port == 80 || port == 443 {
		suggest = fmt.Sprintf("%q (or %q)", host, dest)
	}
	http.Error(w, fmt.Sprintf("airlock: egress to %s is not allowed by this sandbox's manifest; add %s to %s",
		dest, suggest, AllowKey), http.StatusForbidden)
}

func (s *Server) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if s.Dial != nil {
		return s.Dial(ctx, network, addr)
	}
	d := net.Dialer{Timeout: DialTimeout}
	return d.DialContext(ctx, network, addr)
}

// dialChecked is the forwarding transport's dialer: it checks the address it
// is asked for against the rules once more, so that what is dialled is what
// was allowed whatever the transport made of the URL.
func (s *Server) dialChecked(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil || !Allowed(s.Rules, host, port) {
		return nil, fmt.Errorf("egress to %s is not allowed", addr)
	}
	return s.dial(ctx, network, addr)
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

var _ http.Handler = (*Server)(nil)
