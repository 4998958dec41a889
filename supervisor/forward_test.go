package supervisor

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestForwards: a client of the forward's loopback address talks to the
// target as if it were there, both ways, and sees the target's end; a port
// already taken fails the start naming it; only loopback addresses listen.
func TestForwards(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = io.WriteString(c, "echo:"+line)
			}()
		}
	}()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := free.Addr().String()
	free.Close()

	fw, err := startForwards([]Forward{{Listen: listen, To: target.Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", listen)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, "PING\n")
		got, err := io.ReadAll(c) // to the target's end
		c.Close()
		if err != nil || string(got) != "echo:PING\n" {
			t.Fatalf("through the forward: %q %v", got, err)
		}
	}

	if _, err := startForwards([]Forward{{Listen: listen, To: "db:5432"}}); err == nil || !strings.Contains(err.Error(), "cannot forward "+listen+" to db:5432") {
		t.Errorf("a port in use: %v", err)
	}
	fw.close()
	if c, err := net.Dial("tcp", listen); err == nil {
		c.Close()
		t.Errorf("the forward still listens after close")
	}
	for _, f := range []Forward{{Listen: "0.0.0.0:5432", To: "db:5432"}, {Listen: "127.0.0.1:5432", To: "db"}, {Listen: "5432", To: "db:5432"}} {
		if err := checkForward(f); err == nil {
			t.Errorf("checkForward(%+v) accepted it", f)
		}
	}
}

// TestForwardWaitsForTarget: a client that connects before the service
// listens is not accepted and then reset (a service without a healthcheck is
// "ready" once it runs): the forward keeps trying the target, and the client's
// request reaches the service once it listens.
func TestForwardWaitsForTarget(t *testing.T) {
	reserve, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	to := reserve.Addr().String()
	reserve.Close() // refused until the service below listens
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := free.Addr().String()
	free.Close()
	fw, err := startForwards([]Forward{{Listen: listen, To: to}})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.close()

	c, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "PING\n"); err != nil {
		t.Fatal(err)
	}
	// The service comes up a moment later (a slow start).
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		time.Sleep(300 * time.Millisecond)
		target, err := net.Listen("tcp", to)
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { target.Close() })
		go func() {
			for {
				s, err := target.Accept()
				if err != nil {
					return
				}
				line, _ := bufio.NewReader(s).ReadString('\n')
				_, _ = io.WriteString(s, "echo:"+line)
				s.Close()
			}
		}()
	}()
	got, err := io.ReadAll(c)
	<-listening
	if err != nil || string(got) != "echo:PING\n" {
		t.Fatalf("a client that came before the service: read %q, %v; want echo:PING", got, err)
	}
}
