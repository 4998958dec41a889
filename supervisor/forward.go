package supervisor

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Forward makes a port of another container (a service) reachable on the
// sandbox's loopback: what a CI job that reaches its services on
// 127.0.0.1:PORT needs, unchanged, when the job is the sandbox's main command.
type Forward struct {
	Listen string `json:"listen"` // 127.0.0.1:PORT
	To     string `json:"to"`     // service:PORT
}

// forwardDialTimeout bounds a connection to the target.
const forwardDialTimeout = 10 * time.Second

// checkForward checks a spec entry: a loopback listen address and a target.
func checkForward(f Forward) error {
	host, port, err := net.SplitHostPort(f.Listen)
	if err != nil || port == "" {
		return fmt.Errorf("listen %q is not HOST:PORT", f.Listen)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen %q is not a loopback address", f.Listen)
	}
	if h, p, err := net.SplitHostPort(f.To); err != nil || h == "" || p == "" {
		return fmt.Errorf("to %q is not HOST:PORT", f.To)
	}
	return nil
}

// forwarder runs the listeners of the spec's forwards until closed.
type forwarder struct {
	listeners []net.Listener
	wg        sync.WaitGroup
	mu        sync.Mutex
	conns     map[net.Conn]bool
	resolved  map[string]string // target → the address its name resolved to
}

// startForwards listens on every forward's address, or fails naming the one
// that cannot listen (a port already in use in the sandbox).
func startForwards(fs []Forward) (*forwarder, error) {
	f := &forwarder{conns: map[net.Conn]bool{}}
	for _, fw := range fs {
		l, err := net.Listen("tcp", fw.Listen)
		if err != nil {
			f.close()
			return nil, fmt.Errorf("cannot forward %s to %s: %w", fw.Listen, fw.To, err)
		}
		f.listeners = append(f.listeners, l)
		f.wg.Add(1)
		go f.accept(l, fw.To)
	}
	return f, nil
}

func (f *forwarder) accept(l net.Listener, to string) {
	defer f.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of fds, say: do not spin
			continue
		}
		f.wg.Add(1)
		go f.pipe(c, to)
	}
}

// pipe copies between a client and a new connection to the target, each way
// until its end, half-closing the other side as TCP proxies do.
func (f *forwarder) pipe(c net.Conn, to string) {
	defer f.wg.Done()
	defer c.Close()
	t, err := f.dial(to)
	if err != nil {
		return // the client sees its connection closed, as with a port nobody listens on
	}
	defer t.Close()
	if !f.track(c, t) {
		return
	}
	defer f.untrack(c, t)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(t, c)
	go cp(c, t)
	<-done
	<-done
}

func (f *forwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		return false // closed
	}
	for _, c := range cs {
		f.conns[c] = true
	}
	return true
}

func (f *forwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		delete(f.conns, c)
	}
}

// dial connects to the target. The address its name resolved to is kept
// (a service's address does not change while the sandbox lives, and a lookup
// through the Engine's DNS costs each connection of a test suite that makes
// many); a failed dial looks the name up again.
func (f *forwarder) dial(to string) (net.Conn, error) {
	f.mu.Lock()
	addr := f.resolved[to]
	f.mu.Unlock()
	if addr != "" {
		if c, err := net.DialTimeout("tcp", addr, forwardDialTimeout); err == nil {
			return c, nil
		}
	}
	host, port, err := net.SplitHostPort(to)
	if err != nil {
		return nil, err
	}
	// A service that runs but does not listen yet refuses: try again until
	// it listens (the client waits, as for a server slow to accept), so
	// that a connection accepted here is not then reset.
	deadline := time.Now().Add(forwardDialTimeout)
	var c net.Conn
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		ips, err := net.LookupIP(host)
		if err == nil && len(ips) > 0 {
			addr = net.JoinHostPort(ips[0].String(), port)
			if c, err = net.DialTimeout("tcp", addr, time.Until(deadline)); err == nil {
				break
			}
		}
		if time.Now().Add(wait).After(deadline) {
			if err == nil {
				err = fmt.Errorf("no address")
			}
			return nil, fmt.Errorf("cannot reach %s: %w", to, err)
		}
		time.Sleep(wait)
	}
	f.mu.Lock()
	if f.resolved == nil {
		f.resolved = map[string]string{}
	}
	f.resolved[to] = addr
	f.mu.Unlock()
	return c, nil
}

// close stops listening and ends the connections in flight.
func (f *forwarder) close() {
	if f == nil {
		return
	}
	for _, l := range f.listeners {
		_ = l.Close()
	}
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}
