package supervisor

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
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
