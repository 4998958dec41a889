package control_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// socketClient is an HTTP client of the daemon's socket.
func socketClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// rawGet does an HTTP GET on the daemon's socket, with the request headers given
// as name, value pairs, and returns status and body.
func rawGet(t *testing.T, sock, path string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t, 10*time.Second), http.MethodGet, "http://airlockd"+path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := socketClient(sock).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode >= 400 && ct != "application/json" {
		t.Errorf("GET %s: error with Content-Type %q, want application/json", path, ct)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAPIErrors: JSON errors with stable reasons.
func TestAPIErrors(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 2*time.Minute)

	code, body := rawGet(t, e.paths.Socket(), "/v1/sandboxes/no-such-sandbox")
	var ce client.Error
	if code != http.StatusNotFound || json.Unmarshal([]byte(body), &ce) != nil || ce.Reason != "sandbox_not_found" || ce.Message == "" {
		t.Errorf("GET an unknown sandbox: %d %s", code, body)
	}
	for _, call := range map[string]func() error{
		"get":    func() error { _, err := c.Get(ctx, "no-such-sandbox"); return err },
		"stop":   func() error { _, err := c.Stop(ctx, "no-such-sandbox"); return err },
		"resume": func() error { _, err := c.Resume(ctx, "no-such-sandbox", nil); return err },
		"delete": func() error { _, err := c.Delete(ctx, "no-such-sandbox"); return err },
		"events": func() error { _, err := c.Events(ctx, "no-such-sandbox", 0, false); return err },
		"follow": func() error { _, err := c.Events(ctx, "no-such-sandbox", 0, true); return err },
		"exec": func() error {
			_, err := c.Exec(ctx, "no-such-sandbox", &client.ExecRequest{Cmd: []string{"true"}})
			return err
		},
	} {
		if err := call(); apiReason(err) != client.ReasonSandboxNotFound {
			t.Errorf("%v on an unknown sandbox, want sandbox_not_found", err)
		}
	}
	for _, bad := range []string{"ab", "-abc", "abc-", "a b c", strings.Repeat("a", 201), "abc/def"} {
		req := e.upRequest(bad)
		if _, err := c.Create(ctx, req); apiReason(err) != client.ReasonInvalidID {
			t.Errorf("create with id %q: %v, want invalid_id", bad, err)
		}
	}
	if list, _ := c.List(ctx, nil); len(list) != 0 {
		t.Errorf("refused creates left records: %+v", list)
	}

	id := uniq("api-errors")
	if _, err := c.Create(ctx, e.upRequest(id)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, e.upRequest(id)); apiReason(err) != client.ReasonIDAlreadyUsed {
		t.Errorf("a second create with id %s: %v, want id_already_used", id, err)
	}
	waitReady(t, c, id)
	sb, _ := c.Get(ctx, id)
	code, body = rawGet(t, e.paths.Socket(), "/v1/sandboxes/"+id+"/events?from=999")
	if code != http.StatusBadRequest || !strings.Contains(body, `"reason":"bad_cursor"`) {
		t.Errorf("events from beyond the end: %d %s", code, body)
	}
	code, body = rawGet(t, e.paths.Socket(), "/v1/sandboxes/"+id+"/events?from=x")
	if code != http.StatusBadRequest || !strings.Contains(body, `"reason":"bad_cursor"`) {
		t.Errorf("events from a non-number: %d %s", code, body)
	}
	for _, q := range []string{"daemon=idle&stream=bogus", "daemon=idle&stream=stdout&stderr=1"} {
		code, body = rawGet(t, e.paths.Socket(), "/v1/sandboxes/"+id+"/logs?"+q)
		if code != http.StatusBadRequest || !strings.Contains(body, `"reason":"invalid_request"`) {
			t.Errorf("logs?%s: %d %s, want invalid_request", q, code, body)
		}
	}
	if _, err := c.Events(ctx, id, sb.LastSeq+1, true); apiReason(err) != client.ReasonBadCursor {
		t.Errorf("follow from beyond the end: %v, want bad_cursor", err)
	}
	if _, err := c.Resume(ctx, id, nil); apiReason(err) != client.ReasonInvalidState {
		t.Errorf("resume of a ready sandbox: %v, want invalid_state", err)
	}
	if _, err := c.GetExec(ctx, id, "no-such-exec"); apiReason(err) != client.ReasonExecNotFound {
		t.Errorf("an unknown exec: %v, want exec_not_found", err)
	}
	if _, err := c.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, 30*time.Second, client.StateStopped)
	if _, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"true"}}); apiReason(err) != client.ReasonInvalidState {
		t.Errorf("exec in a stopped sandbox: %v, want invalid_state", err)
	}
	if _, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"true"}, Interactive: true}); apiReason(err) != client.ReasonInvalidState {
		t.Errorf("interactive exec in a stopped sandbox: %v, want invalid_state", err)
	}
	if _, err := c.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, 30*time.Second, client.StateDeleted)
	if _, err := c.Create(ctx, e.upRequest(id)); apiReason(err) != client.ReasonIDAlreadyUsed {
		t.Errorf("create with the id of a deleted sandbox: %v, want id_already_used", err)
	}
	if _, err := c.Resume(ctx, id, nil); apiReason(err) != client.ReasonInvalidState {
		t.Errorf("resume of a deleted sandbox: %v, want invalid_state", err)
	}

	// After a restart the ID is still refused.
	d.stop(t, syscall.SIGTERM)
	d = e.startDaemon(binA)
	if _, err := d.client.Create(ctx, e.upRequest(id)); apiReason(err) != client.ReasonIDAlreadyUsed {
		t.Errorf("create with a used id after a restart: %v, want id_already_used", err)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)

	// Bad requests.
	if _, err := d.client.Create(ctx, &client.CreateRequest{Kind: "up"}); apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("create without a manifest: %v, want invalid_request", err)
	}
	req := e.upRequest("")
	req.Kind = "bogus"
	if _, err := d.client.Create(ctx, req); apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("create of kind bogus: %v, want invalid_request", err)
	}
	if list, _ := d.client.List(ctx, nil); len(list) != 0 {
		t.Errorf("refused creates left records: %+v", list)
	}
}
