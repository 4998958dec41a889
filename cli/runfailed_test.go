package cli

import (
	"context"
	"errors"
	"testing"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/exitcode"
	"github.com/airlock-dev/airlock/paths"
)

// TestRunRefusedBecauseFailed (make faults' TestPoolKillDaemon, killed after
// pool.claimed): a daemon started again failed the run's sandbox (its
// claim's stream ended with the daemon) before the CLI attached to it; the
// attach is refused ("is failed, not pending or ready", exit 1). The run
// ends as its sandbox did: the failure's reason and exit code (125), not the
// refusal.
func TestRunRefusedBecauseFailed(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.add(client.Sandbox{ID: "p1", Kind: "run", State: client.StatePending})
	f.emit("p1", client.Event{Kind: "sandbox.failed", State: client.StateFailed, Reason: "cannot read the claim: its stream ended before it", Extra: map[string]string{"exit_code": "125"}})
	p, err := paths.FromEnv(f.getenv)
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(p.Socket())
	refusal := &client.Error{Reason: client.ReasonInvalidState, Message: "sandbox p1 is failed, not pending or ready"}

	err = runFailure(context.Background(), c, "p1", refusal)
	var ee *exitcode.Error
	if !errors.As(err, &ee) || ee.Code != ExitAirlock || err.Error() != "cannot read the claim: its stream ended before it" {
		t.Fatalf("runFailure = %v (%T), want exit %d with the failure's reason", err, err, ExitAirlock)
	}
	// Another error, or a sandbox that did not fail, is the API's answer.
	f.add(client.Sandbox{ID: "r1", State: client.StateReady})
	err = runFailure(context.Background(), c, "r1", &client.Error{Reason: client.ReasonInvalidState, Message: "sandbox r1 is ready"})
	if !errors.As(err, &ee) || ee.Code != ExitFailure || err.Error() != "sandbox r1 is ready" {
		t.Errorf("a ready sandbox: %v, want the refusal (exit 1)", err)
	}
}
