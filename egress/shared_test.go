package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// sitesUnderTest runs a Sites on free ports of the loopback and returns a
// function sending one command and waiting for its reply, and the denials.
func sitesUnderTest(t *testing.T) (do func(Command) Reply, denials chan SiteDenial, proxyPort int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxyPort = l.Addr().(*net.TCPAddr).Port
	dnsPort := l2.Addr().(*net.TCPAddr).Port
	l.Close()
	l2.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sites{Out: outW, ProxyPort: proxyPort, DNSPort: dnsPort}
	done := make(chan struct{})
	go func() { _ = s.Serve(ctx, inR); close(done) }()
	t.Cleanup(func() { cancel(); inW.Close(); <-done; outW.Close() })
	replies := make(chan Reply, 16)
	denials = make(chan SiteDenial, 64)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var v struct {
				Seq   int64  `json:"seq"`
				Error string `json:"error"`
				SiteDenial
			}
			if json.Unmarshal(sc.Bytes(), &v) != nil {
				continue
			}
			if v.Seq > 0 {
				replies <- Reply{Seq: v.Seq, Error: v.Error}
				continue
			}
			denials <- v.SiteDenial
		}
	}()
	var seq int64
	do = func(c Command) Reply {
		seq++
		c.Seq = seq
		b, _ := json.Marshal(c)
		if _, err := inW.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-replies:
			if r.Seq != seq {
				t.Fatalf("reply %d to command %d", r.Seq, seq)
			}
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("no reply to %+v", c)
		}
		return Reply{}
	}
	return do, denials, proxyPort
}

func get(t *testing.T, proxyAddr, target string) (int, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxyAddr, 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

// TestSitesApartByAddress: one proxy, two sites (two sandboxes' addresses):
// each is judged by its own allow list, each denial names the site it
// arrived on, an address with no site has nothing listening, and a dropped
// site stops answering.
func TestSitesApartByAddress(t *testing.T) {
	do, denials, port := sitesUnderTest(t)
	a, b := "127.0.0.2", "127.0.0.3"
	if r := do(Command{Op: "site", Addr: a, Allow: []string{"a.test"}}); r.Error != "" {
		t.Fatal(r.Error)
	}
	if r := do(Command{Op: "site", Addr: b, Allow: []string{"b.test"}}); r.Error != "" {
		t.Fatal(r.Error)
	}
	pa, pb := net.JoinHostPort(a, fmt.Sprint(port)), net.JoinHostPort(b, fmt.Sprint(port))
	// a's allowed name is b's denial, and the other way round.
	if code, err := get(t, pa, "b.test:443"); err != nil || code != http.StatusForbidden {
		t.Fatalf("b.test through a: %d, %v", code, err)
	}
	if code, err := get(t, pb, "a.test:443"); err != nil || code != http.StatusForbidden {
		t.Fatalf("a.test through b: %d, %v", code, err)
	}
	for _, want := range []SiteDenial{{Addr: a, Denial: Denial{Host: "b.test", Port: 443, Method: "CONNECT"}}, {Addr: b, Denial: Denial{Host: "a.test", Port: 443, Method: "CONNECT"}}} {
		select {
		case d := <-denials:
			if d != want {
				t.Errorf("denial %+v, want %+v", d, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no denial %+v", want)
		}
	}
	if _, err := get(t, "127.0.0.4:"+fmt.Sprint(port), "a.test:443"); err == nil {
		t.Fatal("an address with no site answered")
	}
	if r := do(Command{Op: "drop", Addr: a}); r.Error != "" {
		t.Fatal(r.Error)
	}
	if _, err := get(t, pa, "a.test:443"); err == nil {
		t.Fatal("a dropped site still answers")
	}
	if code, err := get(t, pb, "x.test:443"); err != nil || code != http.StatusForbidden {
		t.Fatalf("the other site after the drop: %d, %v", code, err)
	}
	if r := do(Command{Op: "site", Addr: "0.0.0.0"}); r.Error == "" {
		t.Fatal("a site on the unspecified address was accepted")
	}
	if r := do(Command{Op: "site", Addr: a, Allow: []string{"*"}}); r.Error == "" {
		t.Fatal("a bad allow entry was accepted")
	}
}
