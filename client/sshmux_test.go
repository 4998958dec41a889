package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/stdiomux"
)

// muxServerEnv makes this test binary a stand-in for `airlock daemon
// dial-stdio --mux` of the build it names: the hello, then the health route
// on every stream.
const muxServerEnv = "AIRLOCK_CLIENT_TEST_MUX_SERVER"

func serveMux(build string) {
	fmt.Printf("%s %s linux amd64\n", client.MuxHello, build)
	s := stdiomux.Server(stdioConn{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(client.Health{PID: os.Getpid(), BuildID: build})
	})
	_ = (&http.Server{Handler: h}).Serve(muxListener{s})
}

type muxListener struct{ s *stdiomux.Session }

func (l muxListener) Accept() (net.Conn, error) { return l.s.Accept() }
func (l muxListener) Close() error              { return l.s.Close() }
func (l muxListener) Addr() net.Addr            { return stdioAddr{} }

// TestCommandMux: many requests at once, on many connections of the HTTP
// client, all go through one process (the one ssh of an ssh:// address).
func TestCommandMux(t *testing.T) {
	t.Setenv(muxServerEnv, "mine")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewCommandMux([]string{self}, client.SSHOptions{BuildID: "mine"})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	pids := map[int]int{}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := c.Health(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			pids[h.PID]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(pids) != 1 {
		t.Errorf("20 requests were answered by %d processes (%v), want one", len(pids), pids)
	}
}

// TestCommandMuxRemoteErrors: what the remote command says when it cannot
// serve becomes a RemoteError (no airlock, one too old, another build), and
// a connection that dies fails the requests with what ssh said.
func TestCommandMuxRemoteErrors(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sh := func(script string) []string { return []string{"sh", "-c", script} }
	for _, c := range []struct {
		name           string
		argv           []string
		reason, detail string
	}{
		{"missing", sh(`echo "airlock-remote: missing on Linux aarch64" >&2; exit 127`), client.RemoteMissing, "Linux aarch64"},
		{"older", sh(`echo "Error: unknown flag: --mux" >&2; exit 2`), client.RemoteOlder, ""},
		{"other build", []string{"env", muxServerEnv + "=theirs", self}, client.RemoteOtherBuild, "theirs"},
	} {
		cl := client.NewCommandMux(c.argv, client.SSHOptions{BuildID: "mine"})
		err := cl.Connect(ctx)
		re, ok := client.IsRemoteError(err)
		if !ok || re.Reason != c.reason || (c.detail != "" && re.Platform != c.detail && re.BuildID != c.detail) {
			t.Errorf("%s: %#v (%v)", c.name, re, err)
		}
		if _, err := cl.Health(ctx); err == nil {
			t.Errorf("%s: a request succeeded", c.name)
		}
		cl.Close()
	}
	dying := client.NewCommandMux(sh(`echo "airlock-mux 1 mine linux amd64"; echo "ssh: connection to box closed by remote host" >&2; exit 255`), client.SSHOptions{BuildID: "mine"})
	defer dying.Close()
	if _, err := dying.Health(ctx); err == nil || !strings.Contains(err.Error(), "closed by remote host") {
		t.Errorf("a connection that died: %v, want ssh's words", err)
	}
}

// TestRemoteScript: the remote script runs this build from the remote's
// cache, else airlock on the PATH, else says there is none with `uname -sm`;
// a remote command is used as it is.
func TestRemoteScript(t *testing.T) {
	home, bin := t.TempDir(), t.TempDir()
	write := func(path, said string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("#!/bin/sh\necho "+said+" \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run := func(o client.SSHOptions) string {
		cmd := exec.Command("sh", "-c", client.RemoteScript(o, "daemon dial-stdio --mux"))
		cmd.Env = []string{"HOME=" + home, "PATH=" + bin + ":/usr/bin:/bin"}
		out, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	o := client.SSHOptions{BuildID: "b1"}
	if got := run(o); !strings.HasPrefix(got, "airlock-remote: missing on Linux") {
		t.Errorf("no airlock: %q", got)
	}
	write(filepath.Join(bin, "airlock"), "path")
	if got := run(o); got != "path daemon dial-stdio --mux" {
		t.Errorf("airlock on PATH: %q", got)
	}
	write(filepath.Join(home, ".cache/airlock/bin/b1/airlock"), "cached")
	if got := run(o); got != "cached daemon dial-stdio --mux" {
		t.Errorf("the cached build: %q", got)
	}
	write(filepath.Join(home, "opt/airlock"), "own")
	if got := run(client.SSHOptions{BuildID: "b1", Command: "~/opt/airlock"}); got != "own daemon dial-stdio --mux" {
		t.Errorf("a remote command: %q", got)
	}
	if got := run(client.SSHOptions{BuildID: "b1", Command: "~/nope/airlock"}); !strings.HasPrefix(got, "airlock-remote: missing on") {
		t.Errorf("a remote command that is not there: %q", got)
	}
	if err := client.CheckRemoteCommand("airlock; rm -rf ~"); err == nil {
		t.Error("a remote command with shell syntax was accepted")
	}
	if strings.Contains(client.RemoteScript(o, "x"), "'") {
		t.Error("the remote script holds a single quote")
	}
}
