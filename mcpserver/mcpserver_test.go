package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/client"
)

// TestHeadTail: whatever the sizes of the writes, a result keeps the first
// and the last half of the bound and says how many bytes were cut between.
func TestHeadTail(t *testing.T) {
	data := make([]byte, 1000)
	for i := range data {
		data[i] = 'a' + byte(i%26)
	}
	for _, n := range []int{0, 1, 99, 100, 101, 500, 1000} {
		for _, chunk := range []int{1, 7, 50, 100, 1000} {
			b := newHeadTail(100)
			for p := data[:n]; len(p) > 0; {
				k := min(chunk, len(p))
				b.Write(p[:k])
				p = p[k:]
			}
			want := string(data[:n])
			if n > 100 {
				want = string(data[:50]) + "\n[airlock: " + itoa(n-100) + " of " + itoa(n) + " bytes cut here]\n" + string(data[n-50:n])
			}
			if got := b.String(); got != want {
				t.Errorf("%d bytes in writes of %d: %q, want %q", n, chunk, got, want)
			}
			if b.total != int64(n) || b.cut() != int64(max(0, n-100)) {
				t.Errorf("%d bytes in writes of %d: total %d, cut %d", n, chunk, b.total, b.cut())
			}
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestBoundedTextIsEscaped: control characters are shown as escapes, and a
// cut inside a rune leaves no half of it.
func TestBoundedTextIsEscaped(t *testing.T) {
	b := newHeadTail(10)
	b.Write([]byte("\x1b[2Jé\x9bxxxxxxxxxxxxxxxxxxxéé\x07"))
	got := b.String()
	if strings.ContainsAny(got, "\x1b\x07") || !strings.HasPrefix(got, `\x1b[2J`) || !strings.HasSuffix(got, `é\x07`) {
		t.Errorf("%q", got)
	}
	if !strings.Contains(got, "bytes cut here]") {
		t.Errorf("no note of the cut: %q", got)
	}
	kept, cut := lastBytes([]byte("line one\nline two\nline three\n"), 15)
	if string(kept) != "line three\n" || cut != 18 {
		t.Errorf("lastBytes: %q, %d", kept, cut)
	}
	if got := trimRuneEnd([]byte("abé")[:3]); string(got) != "ab" {
		t.Errorf("trimRuneEnd: %q", got)
	}
	if got := trimRuneStart([]byte("é!")[1:]); string(got) != "!" {
		t.Errorf("trimRuneStart: %q", got)
	}
}

// connect serves a server of a daemon that is not there (a socket nothing
// listens on) to an in-memory client.
func connect(t *testing.T, o Options) *mcp.ClientSession {
	t.Helper()
	if o.Client == nil {
		o.Client = client.New(filepath.Join(t.TempDir(), "airlockd.sock"))
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := New(o).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestToolsSchemas: every tool has a described object input with its
// required fields, and a structured output.
func TestToolsSchemas(t *testing.T) {
	cs := connect(t, Options{})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	required := map[string][]string{
		"create_sandbox": nil, "list_sandboxes": nil, "delete_sandbox": {"sandbox_id"},
		"run_command": {"sandbox_id", "argv"}, "start_command": {"sandbox_id", "argv"}, "read_command_output": {"sandbox_id", "exec_id"},
		"read_file": {"sandbox_id", "path"}, "write_file": {"sandbox_id", "path", "content"}, "list_files": {"sandbox_id", "path"},
	}
	if len(res.Tools) != len(required) {
		t.Errorf("%d tools, want %d", len(res.Tools), len(required))
	}
	for _, tl := range res.Tools {
		want, ok := required[tl.Name]
		if !ok {
			t.Errorf("tool %s is not known to the test", tl.Name)
			continue
		}
		b, _ := json.Marshal(tl.InputSchema)
		var s struct {
			Type     string   `json:"type"`
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(b, &s); err != nil || s.Type != "object" || strings.Join(s.Required, ",") != strings.Join(want, ",") {
			t.Errorf("%s: input schema %s, want required %v", tl.Name, b, want)
		}
		if tl.Description == "" || tl.OutputSchema == nil || tl.Annotations == nil {
			t.Errorf("%s: no description, output schema or annotations", tl.Name)
		}
	}
}

// TestToolErrors: a call the server refuses, or that cannot reach the daemon,
// is a tool error saying what could not be done and why.
func TestToolErrors(t *testing.T) {
	cs := connect(t, Options{ProjectsHere: true})
	ctx := context.Background()
	for _, c := range []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"run_command", map[string]any{"sandbox_id": "sb", "argv": []string{}}, []string{"cannot run a command in sb: argv is required"}},
		{"run_command", map[string]any{"sandbox_id": "sb", "argv": []string{"true"}, "timeout_seconds": -1}, []string{"timeout_seconds is -1"}},
		{"start_command", map[string]any{"sandbox_id": "sb", "argv": []string{"cat"}, "stdin": "x"}, []string{"a background command takes no stdin"}},
		{"create_sandbox", map[string]any{}, []string{"cannot create the sandbox: give a manifest"}},
		{"create_sandbox", map[string]any{"project_dir": "rel/dir"}, []string{`project_dir "rel/dir" is not an absolute path`}},
		{"create_sandbox", map[string]any{"project_dir": t.TempDir()}, []string{"has no sandbox.toml"}},
		{"write_file", map[string]any{"sandbox_id": "sb", "path": "/f", "content": "x", "mode": "999"}, []string{"want octal permission bits"}},
		{"write_file", map[string]any{"sandbox_id": "sb", "path": "/f", "content": "!", "encoding": "base64"}, []string{"content is not base64"}},
		{"read_file", map[string]any{"sandbox_id": "sb", "path": "/f", "encoding": "utf-16"}, []string{`encoding "utf-16"`}},
		{"list_sandboxes", map[string]any{}, []string{"cannot list the sandboxes: ", "airlockd.sock"}},
		{"delete_sandbox", map[string]any{"sandbox_id": "sb\x1b[2J"}, []string{`cannot delete the sandbox sb\x1b[2J`}},
	} {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Errorf("%s %v: %v", c.tool, c.args, err)
			continue
		}
		var text bytes.Buffer
		for _, ct := range r.Content {
			if tc, ok := ct.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if !r.IsError {
			t.Errorf("%s %v: not a tool error: %s", c.tool, c.args, text.String())
		}
		for _, w := range c.want {
			if !strings.Contains(text.String(), w) {
				t.Errorf("%s %v: %q does not say %q", c.tool, c.args, text.String(), w)
			}
		}
		if strings.Contains(text.String(), "\x1b") {
			t.Errorf("%s: an unescaped control character: %q", c.tool, text.String())
		}
	}
}

// TestProjectsElsewhere: a server in front of a daemon on another machine
// does not read a project_dir on its own.
func TestProjectsElsewhere(t *testing.T) {
	cs := connect(t, Options{ProjectsHere: false})
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "create_sandbox", Arguments: map[string]any{"project_dir": t.TempDir()}})
	if err != nil || !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "the daemon is on another machine") {
		t.Errorf("%+v, %v", r, err)
	}
}

// TestResourceURIs: the templates are listed; a URI of neither is not found.
func TestResourceURIs(t *testing.T) {
	cs := connect(t, Options{ProjectsHere: true})
	ctx := context.Background()
	res, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(res.ResourceTemplates) != 2 || res.ResourceTemplates[0].URITemplate == "" {
		t.Fatalf("%+v, %v", res, err)
	}
	for _, uri := range []string{"airlock://sandboxes/x/other", "airlock://sandboxes//events", "airlock://sandboxes/x/logs/", "airlock://sandboxes/x/logs/a/b"} {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("%s: no error", uri)
		}
	}
	if id, rest, err := parseURI("airlock://sandboxes/sb-1/logs/web"); err != nil || id != "sb-1" || rest != "logs/web" {
		t.Errorf("parseURI: %q %q %v", id, rest, err)
	}
}
