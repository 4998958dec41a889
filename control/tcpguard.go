package control

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// The TCP listener's guards. A web page can make a browser send requests to
// any address, 127.0.0.1 included (CSRF), and a name of the attacker's that
// resolves to it (DNS rebinding) makes the page's origin that address; other
// local users, and sandboxes, can connect too. So on TCP every request is
// checked before anything else (the token included): no Origin header (no
// program but a browser sends one), a Host that is the listen address, and a
// body that is JSON (the archive uploads take theirs). Each refusal closes the
// connection, as a 401 does. Connections are capped per listener and per
// source address, so that what TCP clients hold never takes the files the
// daemon needs for its Unix socket and the Engine.

// tcpLimits are the TCP listener's bounds.
const (
	tcpReadHeaderTimeout = 10 * time.Second // a request's headers, then the connection is closed
	tcpIdleTimeout       = 2 * time.Minute  // a keep-alive connection between requests
	tcpMaxHeaderBytes    = 64 << 10
	tcpConnsMax          = 1024 // at most, and at most a quarter of the open-files limit
)

// raiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit and returns
// the soft limit in force.
func raiseFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	if rl.Cur < rl.Max {
		raised := rl
		raised.Cur = rl.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			rl = raised
		}
	}
	return rl.Cur
}

// tcpConnCaps are the TCP listener's connection caps for an open-files limit:
// a quarter of it at most (the rest stays for the Unix socket, the Engine,
// the store and the sandboxes' streams), at most tcpConnsMax, and half of that
// per source address, so that one address (a sandbox, another local user)
// never takes every slot.
func tcpConnCaps(fileLimit uint64) (total, perSource int) {
	total = tcpConnsMax
	if q := fileLimit / 4; q < uint64(total) {
		total = int(q)
	}
	total = max(total, 8)
	return total, total / 2
}

// capListener accepts at most total connections at once, perSource from one
// source address; one over a cap is closed at once (the kernel's backlog is
// not left to fill, so other sources keep getting in).
type capListener struct {
	net.Listener
	total, perSource int
	log              *slog.Logger

	mu       sync.Mutex
	open     int
	bySource map[string]int
	refused  atomic.Int64
	lastLog  time.Time
}

func newCapListener(l net.Listener, total, perSource int, log *slog.Logger) *capListener {
	return &capListener{Listener: l, total: total, perSource: perSource, log: log, bySource: map[string]int{}}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(src); err == nil {
			src = h
		}
		l.mu.Lock()
		if l.open >= l.total || l.bySource[src] >= l.perSource {
			n := l.refused.Add(1)
			logNow := time.Since(l.lastLog) > 10*time.Second
			if logNow {
				l.lastLog = time.Now()
			}
			open, fromSrc := l.open, l.bySource[src]
			l.mu.Unlock()
			c.Close()
			if logNow {
				l.log.Warn("TCP connections over the cap closed", "refused", n, "open", open, "max", l.total,
					"source", src, "from_source", fromSrc, "per_source_max", l.perSource)
			}
			continue
		}
		l.open++
		l.bySource[src]++
		l.mu.Unlock()
		return &capConn{Conn: c, l: l, src: src}, nil
	}
}

type capConn struct {
	net.Conn
	l    *capListener
	src  string
	once sync.Once
}

func (c *capConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		if c.l.bySource[c.src]--; c.l.bySource[c.src] <= 0 {
			delete(c.l.bySource, c.src)
		}
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// hostCheck says whether a request's Host names the listener: its --host, its
// address, localhost on loopback; on a wildcard address, the address the
// connection reached; with TLS, a DNS name of the certificate (a browser
// refuses the certificate for any other name).
type hostCheck struct {
	port  int
	tls   bool
	names map[string]bool
	any   bool // listening on every address
}

func newHostCheck(host string, addr *net.TCPAddr, tlsConfig *tls.Config) *hostCheck {
	h := &hostCheck{port: addr.Port, tls: tlsConfig != nil, names: map[string]bool{}}
	h.names[normHost(host)] = true
	h.names[normHost(addr.IP.String())] = true
	if addr.IP.IsLoopback() || host == "localhost" {
		h.names["localhost"] = true
	}
	h.any = addr.IP.IsUnspecified()
	if tlsConfig != nil {
		for _, c := range tlsConfig.Certificates {
			if len(c.Certificate) == 0 {
				continue
			}
			if leaf, err := x509.ParseCertificate(c.Certificate[0]); err == nil {
				for _, n := range leaf.DNSNames {
					h.names[normHost(n)] = true
				}
				for _, ip := range leaf.IPAddresses {
					h.names[normHost(ip.String())] = true
				}
			}
		}
	}
	return h
}

// normHost is a host name lower-cased without a trailing dot, or an IP address
// in its canonical form.
func normHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().String()
	}
	return h
}

func (h *hostCheck) ok(r *http.Request) bool {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		// No port: the scheme's own.
		host, port = r.Host, "80"
		if h.tls {
			port = "443"
		}
	}
	if port != strconv.Itoa(h.port) {
		return false
	}
	host = normHost(host)
	if h.names[host] {
		return true
	}
	if h.any {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if ta, ok := la.(*net.TCPAddr); ok && normHost(ta.IP.String()) == host {
				return true
			}
		}
	}
	return false
}

// bodyTypes are the media types a route takes on TCP besides JSON.
var bodyTypes = map[string][]string{
	"PUT /v1/sandboxes/{id}/files": {client.MediaTar, client.MediaBytes},
	"PUT /v1/build-contexts/{sum}": {client.MediaTar},
}

// refuse answers err and closes the connection.
func refuse(w http.ResponseWriter, err *client.Error) {
	w.Header().Set("Connection", "close")
	writeError(w, err)
}

// guardTCP wraps the TCP listener's handler (the token check included) with
// the checks of every TCP request.
func guardTCP(hosts *hostCheck, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Values("Origin"); len(o) > 0 {
			refuse(w, &client.Error{Status: http.StatusForbidden, Reason: client.ReasonForbidden,
				Message: "refusing a request with an Origin header (" + strconv.Quote(o[0]) + "): the daemon's API is not for web pages"})
			return
		}
		if !hosts.ok(r) {
			refuse(w, &client.Error{Status: http.StatusForbidden, Reason: client.ReasonForbidden,
				Message: "refusing a request for the host " + strconv.Quote(r.Host) + ": the Host header must be the daemon's listen address"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireJSON refuses, on TCP, a request body that is not JSON, except the
// media types bodyTypes gives its route.
func requireJSON(mux *http.ServeMux, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if r.ContentLength == 0 && ct == "" {
			next.ServeHTTP(w, r)
			return
		}
		mt, _, err := mime.ParseMediaType(ct)
		if err == nil && mt == "application/json" {
			next.ServeHTTP(w, r)
			return
		}
		_, pattern := mux.Handler(r)
		if err == nil {
			for _, t := range bodyTypes[pattern] {
				if mt == t {
					next.ServeHTTP(w, r)
					return
				}
			}
		}
		if r.ContentLength == 0 && r.Method != http.MethodPut && r.Method != http.MethodPost {
			next.ServeHTTP(w, r) // a Content-Type without a body, on a request that takes none
			return
		}
		want := "application/json"
		if ts := bodyTypes[pattern]; len(ts) > 0 {
			want += ", " + strings.Join(ts, ", ")
		}
		refuse(w, &client.Error{Status: http.StatusBadRequest, Reason: client.ReasonInvalidRequest,
			Message: "refusing a body of Content-Type " + strconv.Quote(ct) + " on TCP: this route takes " + want})
	})
}
