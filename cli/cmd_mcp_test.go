package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/client"
)

// TestMCPHosts: `airlock mcp` finds its daemon by the rule of every command
// and client (sdk/testdata/hosts.json): an address the table refuses, given
// by -H or AIRLOCK_HOST, stops it as it stops `ps` (exit 2, the same words),
// with nothing on stdout, the MCP channel.
func TestMCPHosts(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "sdk", "testdata", "hosts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table hostsTable
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range table.Cases {
		if !c.Error {
			continue
		}
		n++
		for _, how := range []struct {
			env  map[string]string
			args []string
		}{{nil, []string{"-H", c.Address}}, {map[string]string{hostEnv: c.Address}, nil}} {
			mcpRun := airlock(t, how.env, append(how.args, "mcp")...)
			ps := airlock(t, how.env, append(how.args, "ps")...)
			if mcpRun.code != ExitUsage || mcpRun.stdout != "" || mcpRun.stderr != ps.stderr || ps.code != ExitUsage {
				t.Errorf("%q %v: mcp exit %d, stdout %q, stderr %q; ps exit %d, stderr %q",
					c.Address, how.env, mcpRun.code, mcpRun.stdout, mcpRun.stderr, ps.code, ps.stderr)
			}
			for _, w := range c.ErrorContains {
				if !strings.Contains(mcpRun.stderr, w) {
					t.Errorf("%q: %q does not say %q", c.Address, mcpRun.stderr, w)
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("hosts.json has %d refused addresses", n)
	}
}

// TestMCPStdio: `airlock mcp` serves MCP on its stdin and stdout, each call a
// request to the daemon the CLI found (here a fake one), and ends when its
// host closes stdin.
func TestMCPStdio(t *testing.T) {
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "web1", State: client.StateReady, Kind: "up", Project: "/src/web\x1b]0;x\x07", CreatedAt: time.Now()})
	f.add(client.Sandbox{ID: "old2", State: client.StateStopped, Project: "/src/old"})

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := run([]string{"mcp"}, inR, outW, &errb, f.getenv)
		outW.Close()
		done <- code
	}()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %q)", err, errb.String())
	}
	if v := cs.InitializeResult().ServerInfo; v.Name != "airlock" || v.Version != Version {
		t.Errorf("server info: %+v", v)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_sandboxes", Arguments: map[string]any{}})
	if err != nil || r.IsError {
		t.Fatalf("list_sandboxes: %+v, %v", r, err)
	}
	got, _ := json.Marshal(r.StructuredContent)
	if !strings.Contains(string(got), `"id":"web1"`) || strings.Contains(string(got), "old2") || !strings.Contains(string(got), `/src/web\\x1b]0;x\\x07`) {
		t.Errorf("list_sandboxes: %s", got)
	}
	cs.Close() // closes stdin
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("airlock mcp exited %d: %s", code, errb.String())
		}
	case <-ctx.Done():
		t.Fatal("airlock mcp did not end when its stdin closed")
	}
	f.assertRequests("GET /v1/sandboxes")
}
