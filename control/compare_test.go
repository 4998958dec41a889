package control_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestCompareAndShell: compare says a sandbox is what its manifest makes now,
// and not once the manifest changed (airlock up then makes it anew); an exec
// with shell: true runs the sandbox's shell (sandbox.shell here).
func TestCompareAndShell(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeManifest(upManifest + "\n[env]\nSHELL_SEEN = \"yes\"\n")
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID

	wm, secrets := e.wire()
	cmp, err := c.Compare(ctx, id, &client.CompareRequest{Manifest: wm, Secrets: secrets})
	if err != nil || !cmp.Same || !cmp.Found {
		t.Fatalf("compare with its own manifest: %+v, %v; want same and found", cmp, err)
	}
	e.writeManifest(upManifest + "\n[env]\nSHELL_SEEN = \"changed\"\n")
	wm, secrets = e.wire()
	if cmp, err := c.Compare(ctx, id, &client.CompareRequest{Manifest: wm, Secrets: secrets}); err != nil || cmp.Same || !cmp.Found {
		t.Errorf("compare with a changed manifest: %+v, %v; want not same, found", cmp, err)
	}
	if _, err := c.Compare(ctx, "no-such-sandbox", &client.CompareRequest{Manifest: wm}); apiReason(err) != client.ReasonSandboxNotFound {
		t.Errorf("compare of a missing sandbox: %v, want sandbox_not_found", err)
	}

	var out, errOut bytes.Buffer
	ex, code, err := c.ExecStream(ctx, id, &client.ExecRequest{Shell: true, Stdin: []byte("echo \"$SHELL_SEEN via $0\"\n")}, &out, &errOut)
	if err != nil || code != 0 || strings.TrimSpace(out.String()) != "yes via /bin/sh" {
		t.Errorf("shell exec: code %d, %v, stdout %q, stderr %q; want yes via /bin/sh", code, err, out.String(), errOut.String())
	}
	if ex != nil && strings.Join(ex.Cmd, " ") != "/bin/sh" {
		t.Errorf("the shell exec's record has cmd %q, want the shell", ex.Cmd)
	}
	if _, _, err := c.ExecStream(ctx, id, &client.ExecRequest{Shell: true, Cmd: []string{"true"}}, &out, &errOut); apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("shell and cmd: %v, want invalid_request", err)
	}
}
