package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Sites is one proxy process serving the sandboxes of a daemon: the daemon
// connects the proxy's container to each sandbox's internal network and gives
// it, for the address it got there, that sandbox's allow list (a site). Each
// site has listeners of its own, bound to that address only (the proxy port,
// DNS on UDP and TCP), with its own Server and Resolver: a request or a query
// is judged by the rules of the network it arrived on, and a connection to an
// address with no site finds nothing listening. Denials are printed with the
// site's address, which tells the daemon whose they are.
//
// The daemon talks to it with Command lines (on the container's stdin) and
// reads Reply and SiteDenial lines (on its stdout).
type Sites struct {
	// Out receives the replies and the denials, one JSON line each.
	Out io.Writer
	// ErrorLog receives the proxy's errors; nil means the log package's
	// standard logger.
	ErrorLog *log.Logger
	// ProxyPort and DNSPort are the ports of each site (0: DefaultPort and 53).
	ProxyPort, DNSPort int
	// Linger is how long Serve goes on with no site before it returns (0:
	// never): a daemon's proxy goes away on its own once no sandbox uses it.
	Linger time.Duration

	mu    sync.Mutex
	sites map[string]*site
	idle  time.Time // since when there has been no site
	out   sync.Mutex
	enc   *json.Encoder
}

// Command is a line from the daemon: "site" serves Addr with the allow list
// Allow (replacing what served it), "drop" stops serving Addr, "sync" does
// nothing (its reply comes after every denial printed before it).
type Command struct {
	Op    string   `json:"op"`
	Seq   int64    `json:"seq"`
	Addr  string   `json:"addr"`
	Allow []string `json:"allow,omitempty"`
}

// Reply answers the Command of the same Seq once it is done (Error empty) or
// failed.
type Reply struct {
	Seq   int64  `json:"seq"`
	Error string `json:"error,omitempty"`
}

// SiteDenial is a denial of the site at Addr.
type SiteDenial struct {
	Addr string `json:"addr"`
	Denial
}

// maxCommandLine bounds a command line (an allow list of a manifest).
const maxCommandLine = 1 << 20

// bindWait bounds the wait for an address to appear on an interface (the
// daemon sends a site right after connecting the network).
const bindWait = 3 * time.Second

type site struct {
	srv  *Server
	stop func()
}

// Serve reads commands from r and serves the sites they name until ctx ends,
// or Linger passed with no site. The end of r is not the end: a daemon that
// restarts attaches again.
func (s *Sites) Serve(ctx context.Context, r io.Reader) error {
	s.mu.Lock()
	s.sites = map[string]*site{}
	s.idle = time.Now()
	s.enc = json.NewEncoder(s.Out)
	s.mu.Unlock()
	defer s.closeAll()
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			line, err := readLine(br, maxCommandLine)
			if len(line) > 0 {
				var c Command
				if jerr := json.Unmarshal(line, &c); jerr != nil {
					s.logf("egress proxy: bad command: %v", jerr)
				} else {
					s.reply(Reply{Seq: c.Seq, Error: errText(s.Do(c))})
				}
			}
			if err != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if s.sweep() {
			return nil
		}
	}
}

// sweep drops the sites whose address left the proxy's interfaces (their
// network was removed without a drop), and reports whether the proxy was idle
// for Linger.
func (s *Sites) sweep() bool {
	local := map[string]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				local[p.Addr().String()] = true
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(local) > 0 {
		for addr, st := range s.sites {
			if !local[addr] {
				st.stop()
				delete(s.sites, addr)
				if len(s.sites) == 0 {
					s.idle = time.Now()
				}
			}
		}
	}
	return s.Linger > 0 && len(s.sites) == 0 && time.Since(s.idle) >= s.Linger
}

// Do carries out one command.
func (s *Sites) Do(c Command) error {
	a, err := netip.ParseAddr(c.Addr)
	if err != nil || a.IsUnspecified() {
		return fmt.Errorf("cannot serve %q: not an address", c.Addr)
	}
	addr := a.String()
	switch c.Op {
	case "site":
		rules, err := ParseRules(c.Allow)
		if err != nil {
			return fmt.Errorf("invalid allow entry %w", err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if old := s.sites[addr]; old != nil {
			old.stop()
			delete(s.sites, addr)
		}
		st, err := s.open(addr, rules)
		if err != nil {
			if len(s.sites) == 0 {
				s.idle = time.Now()
			}
			return err
		}
		s.sites[addr] = st
		return nil
	case "drop":
		s.mu.Lock()
		defer s.mu.Unlock()
		if st := s.sites[addr]; st != nil {
			st.stop()
			delete(s.sites, addr)
			if len(s.sites) == 0 {
				s.idle = time.Now()
			}
		}
		return nil
	case "sync":
		return nil
	}
	return fmt.Errorf("unknown command %q", c.Op)
}

// open binds the listeners of a site at addr and serves them.
func (s *Sites) open(addr string, rules []Rule) (*site, error) {
	proxyPort, dnsPort := s.ProxyPort, s.DNSPort
	if proxyPort == 0 {
		proxyPort = DefaultPort
	}
	if dnsPort == 0 {
		dnsPort = 53
	}
	var closers []io.Closer
	fail := func(err error) (*site, error) {
		for _, c := range closers {
			c.Close()
		}
		return nil, fmt.Errorf("cannot serve %s: %w", addr, err)
	}
	l, err := listenWait("tcp", net.JoinHostPort(addr, strconv.Itoa(proxyPort)))
	if err != nil {
		return fail(err)
	}
	closers = append(closers, l)
	pc, err := net.ListenPacket("udp", net.JoinHostPort(addr, strconv.Itoa(dnsPort)))
	if err != nil {
		return fail(err)
	}
	closers = append(closers, pc)
	dl, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(dnsPort)))
	if err != nil {
		return fail(err)
	}
	closers = append(closers, dl)
	srv := &Server{
		Rules:    rules,
		OnDenied: func(d Denial) { s.denied(addr, d) },
		ErrorLog: s.ErrorLog,
	}
	res := &Resolver{Rules: rules, ErrorLog: s.ErrorLog}
	go func() { _ = srv.Serve(l) }()
	go func() { _ = res.ServePacket(pc) }()
	go func() { _ = res.ServeStream(dl) }()
	return &site{srv: srv, stop: func() {
		srv.Close()
		pc.Close()
		dl.Close()
	}}, nil
}

// listenWait listens at addr, waiting up to bindWait for the address to
// appear on an interface.
func listenWait(network, addr string) (net.Listener, error) {
	deadline := time.Now().Add(bindWait)
	for {
		l, err := net.Listen(network, addr)
		if err == nil || !errors.Is(err, syscall.EADDRNOTAVAIL) || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Sites) denied(addr string, d Denial) {
	s.out.Lock()
	defer s.out.Unlock()
	_ = s.enc.Encode(SiteDenial{Addr: addr, Denial: d})
}

func (s *Sites) reply(r Reply) {
	s.out.Lock()
	defer s.out.Unlock()
	_ = s.enc.Encode(r)
}

func (s *Sites) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for addr, st := range s.sites {
		st.stop()
		delete(s.sites, addr)
	}
}

func (s *Sites) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// readLine reads a line of at most max bytes (without its newline); a longer
// one is skipped to its end and returned empty.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	long := false
	for {
		part, err := br.ReadSlice('\n')
		if !long {
			line = append(line, part...)
			if len(line) > max {
				line, long = nil, true
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if long {
			line = nil
		}
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		return line, err
	}
}
