package egress

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// upstream is a stand-in for the resolver the egress proxy asks: a UDP DNS
// server on the test's loopback that answers every A query with 192.0.2.77
// and counts the queries it receives, by name.
type upstream struct {
	addr  string
	count atomic.Int64
	mu    sync.Mutex
	names []string
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	u := &upstream{addr: pc.LocalAddr().String()}
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			u.count.Add(1)
			u.mu.Lock()
			u.names = append(u.names, q.Name.String())
			u.mu.Unlock()
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, RecursionAvailable: true})
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if q.Type == dnsmessage.TypeA {
				_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: [4]byte{192, 0, 2, 77}})
			}
			msg, _ := b.Finish()
			_, _ = pc.WriteTo(msg, from)
		}
	}()
	return u
}

func (u *upstream) asked() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.names)
}

// resolverVia is a Go resolver that sends every query to addr.
func resolverVia(network, addr string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// startResolver serves a Resolver with rules on the test's loopback (UDP and
// TCP on one port) whose upstream is up; it returns its address.
func startResolver(t *testing.T, up *upstream, allow ...string) string {
	t.Helper()
	r := &Resolver{Rules: mustRules(t, allow...), Lookup: resolverVia("udp", up.addr).LookupNetIP, ErrorLog: log.New(io.Discard, "", 0)}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	go func() { _ = r.ServePacket(pc); done <- struct{}{} }()
	go func() { _ = r.ServeStream(l); done <- struct{}{} }()
	t.Cleanup(func() {
		pc.Close()
		l.Close()
		<-done
		<-done
	})
	return pc.LocalAddr().String()
}

// TestResolverAnswersOnlyAllowedNames: a name outside the allowlist gets
// NXDOMAIN and the stand-in upstream receives no query at all (over UDP or
// TCP, whatever the query type); allowed names, wildcards included, resolve
// through it.
func TestResolverAnswersOnlyAllowedNames(t *testing.T) {
	up := newUpstream(t)
	addr := startResolver(t, up, "allowed.test", "*.wild.test", "registry.test:5000", "10.0.0.5")
	ctx := context.Background()
	for _, proto := range []string{"udp", "tcp"} {
		res := resolverVia(proto, addr)
		asked := len(up.asked())
		for _, name := range []string{"exfil-abc123.example.", "wild.test.", "x.allowed.test.", "10.0.0.5.", "ALLOWED.test.evil."} {
			_, err := res.LookupNetIP(ctx, "ip4", name)
			var de *net.DNSError
			if !errors.As(err, &de) || !de.IsNotFound {
				t.Errorf("%s: lookup of %s: want not found, got %v", proto, name, err)
			}
			if _, err := res.LookupTXT(ctx, name); !errors.As(err, &de) || !de.IsNotFound {
				t.Errorf("%s: TXT lookup of %s: want not found, got %v", proto, name, err)
			}
		}
		if got := up.asked()[asked:]; len(got) != 0 {
			t.Fatalf("%s: names outside the allowlist reached the upstream resolver: %v", proto, got)
		}
		for _, name := range []string{"allowed.test.", "Allowed.TEST.", "a.b.wild.test.", "registry.test."} {
			ips, err := res.LookupNetIP(ctx, "ip4", name)
			if err != nil || len(ips) != 1 || ips[0] != netip.MustParseAddr("192.0.2.77") {
				t.Errorf("%s: lookup of allowed %s: got %v, %v", proto, name, ips, err)
			}
		}
		// Another type for an allowed name: an empty answer, nothing asked.
		before := up.count.Load()
		if txt, err := res.LookupTXT(ctx, "allowed.test."); err == nil && len(txt) > 0 {
			t.Errorf("%s: TXT of an allowed name: got %v", proto, txt)
		}
		if n := up.count.Load(); n != before {
			t.Errorf("%s: a TXT query reached the upstream resolver", proto)
		}
	}
	for _, name := range up.asked() {
		if !AllowedName(mustRules(t, "allowed.test", "*.wild.test", "registry.test:5000"), name) {
			t.Errorf("the upstream resolver was asked for %q", name)
		}
	}
}

// TestResolverMalformed: what is not a well-formed query gets no answer or
// an error code, never a lookup.
func TestResolverMalformed(t *testing.T) {
	up := newUpstream(t)
	r := &Resolver{Rules: mustRules(t, "allowed.test"), Lookup: resolverVia("udp", up.addr).LookupNetIP}
	ctx := context.Background()
	if got := r.Answer(ctx, []byte{1, 2, 3}, dnsMaxUDP); got != nil {
		t.Errorf("garbage: want no answer, got %x", got)
	}
	two := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7})
	_ = two.StartQuestions()
	q := dnsmessage.Question{Name: dnsmessage.MustNewName("allowed.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}
	_ = two.Question(q)
	_ = two.Question(q)
	msg, _ := two.Finish()
	var p dnsmessage.Parser
	h, err := p.Start(r.Answer(ctx, msg, dnsMaxUDP))
	if err != nil || h.RCode != dnsmessage.RCodeFormatError || h.ID != 7 {
		t.Errorf("two questions: want FORMERR, got %+v, %v", h, err)
	}
	if n := up.count.Load(); n != 0 {
		t.Errorf("malformed queries reached the upstream resolver %d times", n)
	}
}
