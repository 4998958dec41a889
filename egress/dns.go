package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Limits of the resolver.
const (
	// DNSLookupTimeout bounds the upstream lookup of an allowed name.
	DNSLookupTimeout = 5 * time.Second
	// dnsMaxInFlight bounds the queries answered at once (others wait).
	dnsMaxInFlight = 64
	// dnsTTL is the time to live of the answers given for allowed names.
	dnsTTL = 30
	// dnsMaxUDP is the largest UDP answer (an answer that does not fit is
	// truncated, so the client asks again over TCP).
	dnsMaxUDP = 512
	// dnsTCPIdle closes a TCP client idle between queries.
	dnsTCPIdle = 10 * time.Second
)

// Resolver is the sandbox's DNS server: the only upstream its containers'
// resolver (Docker's embedded DNS) forwards to. It answers A and AAAA queries
// for a name an allow rule names (on any port) with the addresses Lookup
// finds, and NXDOMAIN for any other name without asking anyone: a name
// outside the allowlist never leaves the sandbox, so names cannot carry data
// out either. Other query types for an allowed name get an empty answer.
// Set its fields before the first query; the zero value refuses every name.
type Resolver struct {
	// Rules are the allowed destinations; their host names resolve.
	Rules []Rule
	// Lookup resolves an allowed name to its addresses; network is "ip4" or
	// "ip6". Nil means net.DefaultResolver.LookupNetIP.
	Lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// ErrorLog receives the resolver's errors; nil means the log package's
	// standard logger.
	ErrorLog *log.Logger

	once sync.Once
	sem  chan struct{}
}

func (r *Resolver) init() {
	r.once.Do(func() { r.sem = make(chan struct{}, dnsMaxInFlight) })
}

// ServePacket answers queries arriving on pc (UDP) until pc is closed.
func (r *Resolver) ServePacket(pc net.PacketConn) error {
	r.init()
	buf := make([]byte, 65535)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		query := append([]byte(nil), buf[:n]...)
		r.sem <- struct{}{}
		go func() {
			defer func() { <-r.sem }()
			if resp := r.Answer(context.Background(), query, dnsMaxUDP); resp != nil {
				_, _ = pc.WriteTo(resp, addr)
			}
		}()
	}
}

// ServeStream answers queries arriving on l (TCP, each message preceded by
// its length) until l is closed.
func (r *Resolver) ServeStream(l net.Listener) error {
	r.init()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go r.serveConn(c)
	}
}

func (r *Resolver) serveConn(c net.Conn) {
	defer c.Close()
	var size [2]byte
	for {
		_ = c.SetDeadline(time.Now().Add(dnsTCPIdle))
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		query := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(c, query); err != nil {
			return
		}
		r.sem <- struct{}{}
		resp := r.Answer(context.Background(), query, 65535)
		<-r.sem
		if resp == nil {
			return
		}
		_ = c.SetDeadline(time.Now().Add(dnsTCPIdle))
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(resp))), resp...)); err != nil {
			return
		}
	}
}

// Answer returns the answer to one DNS message of at most maxSize bytes, or
// nil for a message that is not a query (nothing is to be sent back).
func (r *Resolver) Answer(ctx context.Context, query []byte, maxSize int) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	resp := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	q, err := p.Question()
	if err != nil || h.OpCode != 0 {
		resp.RCode = dnsmessage.RCodeFormatError
		if h.OpCode != 0 {
			resp.RCode = dnsmessage.RCodeNotImplemented
		}
		return r.build(resp, nil, nil, maxSize)
	}
	if _, err := p.Question(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		resp.RCode = dnsmessage.RCodeFormatError // one question per query
		return r.build(resp, nil, nil, maxSize)
	}
	if q.Class != dnsmessage.ClassINET || !AllowedName(r.Rules, q.Name.String()) {
		resp.RCode = dnsmessage.RCodeNameError
		return r.build(resp, &q, nil, maxSize)
	}
	resp.Authoritative = true
	var network string
	switch q.Type {
	case dnsmessage.TypeA:
		network = "ip4"
	case dnsmessage.TypeAAAA:
		network = "ip6"
	default:
		return r.build(resp, &q, nil, maxSize) // no data of that type
	}
	ctx, cancel := context.WithTimeout(ctx, DNSLookupTimeout)
	defer cancel()
	addrs, err := r.lookup(ctx, network, q.Name.String())
	var dnsErr *net.DNSError
	switch {
	case err == nil:
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		// No address of that family: an empty answer, not NXDOMAIN (the name
		// may have addresses of the other one).
	default:
		r.logf("egress resolver: %s: %v", q.Name.String(), err)
		resp.RCode = dnsmessage.RCodeServerFailure
		resp.Authoritative = false
	}
	return r.build(resp, &q, addrs, maxSize)
}

func (r *Resolver) lookup(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if r.Lookup != nil {
		return r.Lookup(ctx, network, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

// build encodes an answer; addresses that do not fit in maxSize are left out
// and the answer marked truncated.
func (r *Resolver) build(h dnsmessage.Header, q *dnsmessage.Question, addrs []netip.Addr, maxSize int) []byte {
	for {
		b := dnsmessage.NewBuilder(make([]byte, 0, 512), h)
		b.EnableCompression()
		_ = b.StartQuestions()
		if q != nil {
			_ = b.Question(*q)
		}
		_ = b.StartAnswers()
		for _, a := range addrs {
			rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
			switch {
			case q.Type == dnsmessage.TypeA && a.Unmap().Is4():
				_ = b.AResource(rh, dnsmessage.AResource{A: a.Unmap().As4()})
			case q.Type == dnsmessage.TypeAAAA && a.Is6() && !a.Is4In6():
				_ = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
			}
		}
		msg, err := b.Finish()
		if err != nil {
			r.logf("egress resolver: cannot encode an answer: %v", err)
			return nil
		}
		if len(msg) <= maxSize || len(addrs) == 0 {
			return msg
		}
		h.Truncated = true
		addrs = addrs[:len(addrs)/2]
	}
}

func (r *Resolver) logf(format string, args ...any) {
	if r.ErrorLog != nil {
		r.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}
