package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestUpTimeout: `up -d --timeout D --on-timeout stop` gives the sandbox a
// deadline that ps --json shows and at which the daemon stops it; `up -d
// --timeout` of the stopped sandbox starts it again with a new deadline, and
// `--idle-timeout` sets its own idle timeout; bad flags are usage errors.
func TestUpTimeout(t *testing.T) {
	limit(t)
	e := newEnv(t, byIDManifest)
	for _, bad := range [][]string{{"--on-timeout", "pause", "--timeout", "1h"}, {"--on-idle", "stop"}, {"--timeout", "-5s"}} {
		if r := e.Run(append([]string{"up", "-d"}, bad...)...); r.Code != 2 {
			t.Errorf("up -d %v: want exit 2, got %s", bad, r)
		}
	}
	id := strings.TrimSpace(e.MustRun("up", "-d", "--timeout", "6s", "--on-timeout", "stop").Stdout)
	ps := func() client.Sandbox {
		t.Helper()
		var list []client.Sandbox
		r := e.MustRun("ps", "-a", "--json")
		if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil || len(list) != 1 {
			t.Fatalf("ps -a --json: %v\n%s", err, r)
		}
		return list[0]
	}
	if sb := ps(); sb.ID != id || sb.ExpiresAt == nil || sb.OnTimeout != "stop" || time.Until(*sb.ExpiresAt) > 7*time.Second {
		t.Fatalf("ps --json of a sandbox up -d --timeout 6s made: %+v", sb)
	}
	c := e.daemonAPI()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sb, ev, err := c.WaitState(ctx, id, client.StateStopped, client.StateFailed)
	if err != nil || sb.State != client.StateStopped {
		t.Fatalf("waiting for the deadline: %v %+v", err, sb)
	}
	if ev.Kind != "" && ev.Reason != "timeout" {
		t.Errorf("sandbox.stopped at the deadline: reason %q, want timeout", ev.Reason)
	}

	// Started again, with a new deadline and an idle timeout of its own.
	if r := e.MustRun("up", "-d", "--timeout", "1h", "--idle-timeout", "30m"); strings.TrimSpace(r.Stdout) != id {
		t.Errorf("up -d of the stopped sandbox printed %q, want %s", r.Stdout, id)
	}
	got := ps()
	if got.ExpiresAt == nil || time.Until(*got.ExpiresAt) < 59*time.Minute || got.OnTimeout != "delete" || got.IdleTimeout != 1800 || got.OnIdle != "delete" {
		t.Errorf("after up -d --timeout 1h --idle-timeout 30m: %+v", got.Lifetime)
	}
	e.MustRun("rm", "-f", id)
}
