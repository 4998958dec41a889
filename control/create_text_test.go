package control_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestCreateFromManifestText: a client that cannot resolve a manifest (the
// Python SDK, curl) sends its text (or the same as a JSON document) and the
// values of its ${NAME}s; the daemon resolves it (built-in presets, no host
// environment of its own) and the sandbox runs it, with the given project dir
// or an empty project of its own. Bad manifests are config errors naming the
// key.
func TestCreateFromManifestText(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	// Sandboxes without a project dir have the daemon's empty project as
	// theirs: removed by that label too if the test stops early.
	t.Cleanup(func() { testenv.ForceRemove(e.docker, labelProject, filepath.Join(e.data, "airlock", "empty-project")) })
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 2*time.Minute)
	text := strings.ReplaceAll(`
[sandbox]
image = "{{image}}"
network = "none"

[env]
GREETING = "${GREETING}"
`, "{{image}}", e.image)
	run := func(sb *client.Sandbox, script string) string {
		t.Helper()
		var out, errb bytes.Buffer
		_, code, err := c.ExecStream(ctx, sb.ID, &client.ExecRequest{Cmd: []string{"sh", "-c", script}}, &out, &errb)
		if err != nil || code != 0 {
			t.Fatalf("exec %q: %d %v; stderr %q", script, code, err, errb.String())
		}
		return out.String()
	}

	// Text, no project dir: an empty project of its own, copied in.
	sb, err := c.Create(ctx, &client.CreateRequest{Kind: "up", Start: true, ManifestSource: client.ManifestSource{ManifestTOML: text, Vars: map[string]string{"GREETING": "hello-sdk"}}})
	if err != nil {
		t.Fatal(err)
	}
	sb = waitReady(t, c, sb.ID)
	if got := run(sb, `echo "$GREETING"; touch mine; ls -A`); got != "hello-sdk\nmine\n" {
		t.Errorf("a text manifest without a project dir: %q, want the var's value and an empty project", got)
	}
	// A second one does not see the first one's files.
	doc, _ := json.Marshal(map[string]any{
		"sandbox": map[string]any{"image": e.image, "network": "none"},
		"daemons": map[string]any{"idle": map[string]any{"command": []string{"sleep", "300"}, "timeout": 1}},
	})
	sb2, err := c.Create(ctx, &client.CreateRequest{Kind: "up", Start: true, ManifestSource: client.ManifestSource{ManifestDoc: doc}})
	if err != nil {
		t.Fatal(err)
	}
	sb2 = waitReady(t, c, sb2.ID)
	if got := run(sb2, `ls -A; ps | grep -q "[s]leep 300" && echo daemon-up`); got != "daemon-up\n" {
		t.Errorf("a document manifest (integer timeout, a daemon): %q, want an empty project and the daemon up", got)
	}
	if empty, _ := os.ReadDir(filepath.Join(e.data, "airlock", "empty-project")); len(empty) != 0 {
		t.Errorf("the shared empty project on the host got %d entries", len(empty))
	}

	// Text with a project dir on the daemon's host.
	if err := os.WriteFile(filepath.Join(e.project, "hello.txt"), []byte("from the project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb3, err := c.Create(ctx, &client.CreateRequest{Kind: "up", Start: true, ManifestSource: client.ManifestSource{ManifestTOML: text, ProjectDir: e.project, Vars: map[string]string{"GREETING": "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	sb3 = waitReady(t, c, sb3.ID)
	if got := run(sb3, "cat hello.txt"); got != "from the project\n" {
		t.Errorf("a text manifest with a project dir: %q", got)
	}
	for _, sb := range []*client.Sandbox{sb, sb2, sb3} {
		if _, err := c.Delete(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name   string
		req    client.CreateRequest
		reason string
		msg    string
	}{
		{"bad key", client.CreateRequest{Kind: "up", ManifestSource: client.ManifestSource{ManifestTOML: "[sandbox]\nimage = \"x\"\nbogus = 1\n"}}, client.ReasonConfig, "bogus"},
		{"bad TOML", client.CreateRequest{Kind: "up", ManifestSource: client.ManifestSource{ManifestTOML: "[sandbox\n"}}, client.ReasonConfig, "sandbox.toml"},
		{"both", client.CreateRequest{Kind: "up", ManifestSource: client.ManifestSource{ManifestTOML: text, ManifestDoc: doc}}, client.ReasonInvalidRequest, "not both"},
		{"relative project", client.CreateRequest{Kind: "up", ManifestSource: client.ManifestSource{ManifestTOML: text, ProjectDir: "project"}}, client.ReasonInvalidRequest, "absolute"},
		{"missing project", client.CreateRequest{Kind: "up", ManifestSource: client.ManifestSource{ManifestTOML: text, ProjectDir: "/nonexistent/airlock-project"}}, client.ReasonConfig, "/nonexistent/airlock-project"},
		{"vars without text", client.CreateRequest{Kind: "up", ManifestSource: client.ManifestSource{Vars: map[string]string{"A": "b"}}}, client.ReasonInvalidRequest, "manifest_toml"},
	} {
		_, err := c.Create(ctx, &tc.req)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Reason != tc.reason || !strings.Contains(ce.Message, tc.msg) {
			t.Errorf("%s: %v, want %s naming %q", tc.name, err, tc.reason, tc.msg)
		}
	}
}
