package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/mcpserver"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

// mcpSecret is a value a manifest's ${API_KEY} takes: no result may show it.
const mcpSecret = "mcp-secret-5f1e9a0c77"

// mcpManifest has a daemon whose log says it started (after an escape
// sequence) and an environment variable holding mcpSecret.
const mcpManifest = `[sandbox]
image = "{{image}}"
network = "none"

[env]
API_KEY = "${API_KEY}"

[daemons.web]
command = ["sh", "-c", "printf '\\033]0;retitled\\007web-started\\n'; exec sleep 3600"]
ready = { log = "web-started" }
`

// TestMCP drives the MCP server with real clients against one daemon (with
// a TCP listener and its token) and the real Engine: the Go SDK's over stdio
// (`airlock mcp`) and over streamable HTTP (the daemon's /v1/mcp), and the
// npm package's over stdio (test/mcp-npm).
func TestMCP(t *testing.T) {
	limit(t)
	e := newEnv(t, mcpManifest) // the project's sandbox.toml, for a create from project_dir alone
	token := "mcp-token-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tokenFile := filepath.Join(e.Home, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(testenv.FreePort(t))
	e.MustRun("daemon", "start", "--host", "127.0.0.1", "--port", port, "--token-file", tokenFile)
	manifest := strings.ReplaceAll(mcpManifest, "{{image}}", e.Image)

	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cs := mcpConnect(t, ctx, &mcp.CommandTransport{Command: e.Command(ctx, "mcp")})
		mcpTools(t, ctx, cs, manifest, e.Project)
	})
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		endpoint := "http://127.0.0.1:" + port + mcpserver.Path
		// Without the token the daemon refuses the session.
		bare := mcp.NewClient(&mcp.Implementation{Name: "airlock-e2e", Version: "0"}, nil)
		if cs, err := bare.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, nil); err == nil {
			cs.Close()
			t.Fatal("the MCP server answered without the token")
		} else if !strings.Contains(err.Error(), "401") && !strings.Contains(err.Error(), "Unauthorized") {
			t.Errorf("without the token: %v", err)
		}
		hc := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
		cs := mcpConnect(t, ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true})
		sb := callTool[mcpserver.SandboxInfo](t, ctx, cs, "create_sandbox", map[string]any{
			"project_dir": e.Project, "vars": map[string]string{"API_KEY": mcpSecret},
		})
		if sb.Project != e.Project || sb.State != "ready" {
			t.Errorf("create_sandbox from project_dir: %+v", sb)
		}
		echo := callTool[mcpserver.RunOutput](t, ctx, cs, "run_command", map[string]any{"sandbox_id": sb.ID, "argv": []string{"echo", "over http"}})
		if echo.ExitCode != 0 || echo.Stdout != "over http\n" {
			t.Errorf("run_command over HTTP: %+v", echo)
		}
		callTool[mcpserver.SandboxInfo](t, ctx, cs, "delete_sandbox", map[string]any{"sandbox_id": sb.ID})

		// The Unix socket serves it too, with no token (only its owner can
		// open the socket).
		unix := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", e.Socket())
		}}}
		us := mcpConnect(t, ctx, &mcp.StreamableClientTransport{Endpoint: "http://airlockd" + mcpserver.Path, HTTPClient: unix, MaxRetries: -1, DisableStandaloneSSE: true})
		callTool[mcpserver.ListOutput](t, ctx, us, "list_sandboxes", map[string]any{})
	})
	t.Run("npm", func(t *testing.T) {
		t.Parallel()
		mcpNPM(t, e.Env)
	})
}

// bearer sends the daemon's token with every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func mcpConnect(t *testing.T, ctx context.Context, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "airlock-e2e", Version: "0"}, nil)
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("cannot connect to the MCP server: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callRaw calls a tool; it fails the test when the call itself (not the
// tool) fails, and checks that no result shows mcpSecret.
func callRaw(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, _ := json.Marshal(r)
	if strings.Contains(string(b), mcpSecret) {
		t.Errorf("%s's result shows the secret value: %s", name, b)
	}
	return r
}

// callTool calls a tool that must succeed and returns its structured result.
func callTool[T any](t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) T {
	t.Helper()
	r := callRaw(t, ctx, cs, name, args)
	var out T
	if r.IsError {
		t.Fatalf("%s: %s", name, resultText(r))
	}
	b, err := json.Marshal(r.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		t.Fatalf("%s: cannot read its result %s: %v", name, b, err)
	}
	return out
}

// toolFails calls a tool that must fail (a tool error) with every want in its text.
func toolFails(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, wants ...string) {
	t.Helper()
	r := callRaw(t, ctx, cs, name, args)
	if !r.IsError {
		t.Errorf("%s %v: succeeded, want a tool error", name, args)
		return
	}
	t.Logf("%s: %s", name, resultText(r))
	contains(t, name+"'s error", resultText(r), wants...)
}

func resultText(r *mcp.CallToolResult) string {
	var s []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s = append(s, tc.Text)
		}
	}
	return strings.Join(s, "\n")
}

// mcpTools runs every tool and reads every resource over cs.
func mcpTools(t *testing.T, ctx context.Context, cs *mcp.ClientSession, manifest, project string) {
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	want := []string{"create_sandbox", "delete_sandbox", "list_files", "list_sandboxes", "read_command_output", "read_file", "run_command", "start_command", "write_file"}
	if !slices.Equal(names, want) {
		t.Errorf("tools: %v, want %v", names, want)
	}

	toolFails(t, ctx, cs, "create_sandbox", map[string]any{"manifest": "[sandbox]\nimage = 3\n"}, "cannot create the sandbox", "sandbox.image")
	toolFails(t, ctx, cs, "run_command", map[string]any{"sandbox_id": "no-such-sandbox", "argv": []string{"true"}}, "cannot run true in no-such-sandbox", "sandbox_not_found")
	// A value the daemon quotes in an error is masked there, also when it is
	// a part of the field: Engine 29 quotes the image's path in its
	// registry's URL.
	toolFails(t, ctx, cs, "create_sandbox", map[string]any{"manifest": "[sandbox]\nimage = \"bad/${API_KEY}\"\n", "vars": map[string]string{"API_KEY": mcpSecret}}, "cannot create the sandbox")

	sb := callTool[mcpserver.SandboxInfo](t, ctx, cs, "create_sandbox", map[string]any{
		"manifest": manifest, "project_dir": project, "vars": map[string]string{"API_KEY": mcpSecret}, "labels": map[string]string{"client": "go"},
	})
	if sb.State != "ready" || !slices.Equal(sb.Daemons, []string{"web"}) {
		t.Errorf("create_sandbox: %+v", sb)
	}
	id := sb.ID
	defer func() {
		if t.Failed() {
			callRaw(t, context.WithoutCancel(ctx), cs, "delete_sandbox", map[string]any{"sandbox_id": id})
		}
	}()

	list := callTool[mcpserver.ListOutput](t, ctx, cs, "list_sandboxes", map[string]any{"labels": map[string]string{"client": "go"}})
	if len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != id {
		t.Errorf("list_sandboxes: %+v", list)
	}

	// The command gets the secret; its output is the command's (and shows it,
	// so the test checks no result but this one's).
	echo := callTool[mcpserver.RunOutput](t, ctx, cs, "run_command", map[string]any{"sandbox_id": id, "argv": []string{"sh", "-c", "echo hello; echo oops >&2; exit 3"}})
	if echo.ExitCode != 3 || echo.Stdout != "hello\n" || echo.Stderr != "oops\n" || echo.Note != "" {
		t.Errorf("run_command: %+v", echo)
	}
	// The sandbox has the value (its length says so without showing it).
	if n := callTool[mcpserver.RunOutput](t, ctx, cs, "run_command", map[string]any{"sandbox_id": id, "argv": []string{"sh", "-c", `printf %s "$API_KEY" | wc -c`}}); strings.TrimSpace(n.Stdout) != strconv.Itoa(len(mcpSecret)) {
		t.Errorf("the sandbox's API_KEY: %+v", n)
	}
	big := callTool[mcpserver.RunOutput](t, ctx, cs, "run_command", map[string]any{"sandbox_id": id,
		"argv": []string{"sh", "-c", `printf '\033[31mred\n'; head -c 200000 /dev/zero | tr '\0' a; printf '\nlast line\n'`}})
	if !strings.HasPrefix(big.Stdout, `\x1b[31mred`+"\n") || !strings.HasSuffix(big.Stdout, "\nlast line\n") ||
		len(big.Stdout) > mcpserver.MaxStream+200 || !strings.Contains(big.Stdout, "bytes cut here]") ||
		!strings.Contains(big.Note, "stdout: 134") || strings.Contains(big.Stdout, "\x1b") {
		t.Errorf("run_command, a big output: %d bytes, note %q, starts %q", len(big.Stdout), big.Note, big.Stdout[:min(40, len(big.Stdout))])
	}
	timed := callTool[mcpserver.RunOutput](t, ctx, cs, "run_command", map[string]any{"sandbox_id": id, "argv": []string{"sleep", "60"}, "timeout_seconds": 0.5})
	if timed.ExitCode != 124 || !timed.TimedOut {
		t.Errorf("run_command with a timeout: %+v", timed)
	}

	bg := callTool[mcpserver.StartOutput](t, ctx, cs, "start_command", map[string]any{"sandbox_id": id, "argv": []string{"sh", "-c", "echo one; echo two >&2; echo three"}})
	got := callTool[mcpserver.OutputResult](t, ctx, cs, "read_command_output", map[string]any{"sandbox_id": id, "exec_id": bg.ExecID, "wait_seconds": 60})
	if got.Running || got.ExitCode == nil || *got.ExitCode != 0 || got.Stdout != "one\nthree\n" || got.Stderr != "two\n" || got.StdoutNext != 10 {
		t.Errorf("read_command_output: %+v", got)
	}
	again := callTool[mcpserver.OutputResult](t, ctx, cs, "read_command_output", map[string]any{"sandbox_id": id, "exec_id": bg.ExecID, "stdout_from": 4})
	if again.Stdout != "three\n" || again.Stderr != "two\n" {
		t.Errorf("read_command_output from byte 4: %+v", again)
	}

	callTool[mcpserver.WriteOutput](t, ctx, cs, "write_file", map[string]any{"sandbox_id": id, "path": "/tmp/mcp.txt", "content": "from mcp\n\x1b[2J", "mode": "0600"})
	rf := callTool[mcpserver.ReadOutput](t, ctx, cs, "read_file", map[string]any{"sandbox_id": id, "path": "/tmp/mcp.txt"})
	if rf.Content != `from mcp`+"\n"+`\x1b[2J` || rf.Encoding != "text" || rf.Size != 13 {
		t.Errorf("read_file: %+v", rf)
	}
	raw := callTool[mcpserver.ReadOutput](t, ctx, cs, "read_file", map[string]any{"sandbox_id": id, "path": "/tmp/mcp.txt", "encoding": "base64"})
	if raw.Content != "ZnJvbSBtY3AKG1sySg==" {
		t.Errorf("read_file as base64: %+v", raw)
	}
	ls := callTool[mcpserver.ListFilesOutput](t, ctx, cs, "list_files", map[string]any{"sandbox_id": id, "path": "/tmp"})
	found := false
	for _, f := range ls.Entries {
		if f.Path == "/tmp/mcp.txt" {
			found = f.Type == "file" && f.Size == 13 && f.Mode == "0600"
		}
	}
	if !found {
		t.Errorf("list_files /tmp: %+v", ls)
	}
	toolFails(t, ctx, cs, "read_file", map[string]any{"sandbox_id": id, "path": "/tmp/not-there"}, "cannot read /tmp/not-there in "+id, "path_not_found")

	templates, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 2 {
		t.Errorf("resource templates: %+v, %v", templates, err)
	}
	events := mcpResource(t, ctx, cs, "airlock://sandboxes/"+id+"/events")
	contains(t, "the events resource", events, `"kind":"sandbox.ready"`, `"kind":"exec.finished"`)
	logs := mcpResource(t, ctx, cs, "airlock://sandboxes/"+id+"/logs/web")
	if logs != `\x1b]0;retitled\x07web-started`+"\n" {
		t.Errorf("the logs resource: %q", logs)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "airlock://sandboxes/no-such-sandbox/events"}); err == nil {
		t.Error("the events of no sandbox: no error")
	}

	gone := callTool[mcpserver.SandboxInfo](t, ctx, cs, "delete_sandbox", map[string]any{"sandbox_id": id})
	if gone.State != "deleted" {
		t.Errorf("delete_sandbox: %+v", gone)
	}
	if l := callTool[mcpserver.ListOutput](t, ctx, cs, "list_sandboxes", map[string]any{"labels": map[string]string{"client": "go"}, "all": true}); len(l.Sandboxes) != 0 {
		t.Errorf("list_sandboxes after the delete: %+v", l)
	}
}

// mcpResource reads a resource's text; it must not show mcpSecret.
func mcpResource(t *testing.T, ctx context.Context, cs *mcp.ClientSession, uri string) string {
	t.Helper()
	r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("%s: %v", uri, err)
	}
	if len(r.Contents) != 1 {
		t.Fatalf("%s: %d contents", uri, len(r.Contents))
	}
	if strings.Contains(r.Contents[0].Text, mcpSecret) {
		t.Errorf("%s shows the secret value", uri)
	}
	return r.Contents[0].Text
}

// mcpNPM runs test/mcp-npm's client (the npm package @modelcontextprotocol/sdk)
// against `airlock mcp`: `npm ci` in a copy of the directory, then node.
func mcpNPM(t *testing.T, e *clitest.Env) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the MCP npm client test needs Node 20 or later and npm: %v", err)
	}
	if v, err := exec.Command(node, "--version").Output(); err != nil {
		t.Fatalf("node --version: %v", err)
	} else if major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(v)), "v"), ".", 2)[0]); major < 20 {
		t.Fatalf("the MCP npm client test needs Node 20 or later; %s is %s", node, strings.TrimSpace(string(v)))
	}
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "client.mjs"} {
		b, err := os.ReadFile(filepath.Join("..", "test", "mcp-npm", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ci := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	ci.Dir = dir
	start := time.Now()
	if out, err := ci.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	t.Logf("npm ci: %v", time.Since(start).Round(time.Millisecond))
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = dir
	cmd.Env = e.Environ("AIRLOCK_BIN="+clitest.Bin, "AIRLOCK_MCP_IMAGE="+e.Image, "AIRLOCK_MCP_PROJECT="+e.Project)
	cmd.WaitDelay = 10 * time.Second
	start = time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("node client.mjs (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("the npm MCP client failed: %v", err)
	}
	if !strings.Contains(string(out), "npm client: OK") {
		t.Fatal("the npm MCP client did not say OK")
	}
}
