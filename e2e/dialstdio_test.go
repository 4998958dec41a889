package e2e

import (
	"context"
	"strings"
	"testing"
)

// TestDaemonDialStdio: `airlock daemon dial-stdio` starts the daemon when it
// does not run and speaks its API on stdin and stdout — what a client on
// another machine runs over ssh. Two pipelined requests get their two answers,
// the second after stdin ended; then it exits 0.
func TestDaemonDialStdio(t *testing.T) {
	limit(t)
	e := newEnv(t, plainManifest)
	if _, alive := e.DaemonPID(); alive {
		t.Fatal("a daemon runs before the test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := e.Command(ctx, "daemon", "dial-stdio")
	cmd.Stdin = strings.NewReader("GET /v1/health HTTP/1.1\r\nHost: airlockd\r\n\r\n" +
		"GET /v1/sandboxes HTTP/1.1\r\nHost: airlockd\r\nConnection: close\r\n\r\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dial-stdio: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	if n := strings.Count(string(out), "HTTP/1.1 200 OK"); n != 2 || !strings.Contains(string(out), `"build_id"`) {
		t.Errorf("dial-stdio answered %d requests of 2 (want the health, then the list):\n%s", n, out)
	}
	if _, alive := e.DaemonPID(); !alive {
		t.Errorf("no daemon runs after dial-stdio: it should have started one")
	}
}
