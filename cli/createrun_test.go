package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/secrets"
)

// TestCreateLostBeforeItsAnswer: the daemon accepts a run's create and goes
// away before it answers (the Engine 29 lap of CI saw it at a kill just after
// sandbox.accepted). The daemon that answers next refuses the ID as used and
// leaves the sandbox, pending without a container, to its CLI: nothing makes
// it any more. The run must not wait for its creation forever: it removes it
// and makes it again under a new ID.
func TestCreateLostBeforeItsAnswer(t *testing.T) {
	f := newFakeDaemon(t)
	f.dropCreates = 1
	var stderr bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &stderr, getenv: f.getenv, redactor: secrets.NewRedactor()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := a.daemonClientAgain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := &client.CreateRequest{ID: "run-1", Kind: client.KindRun, Command: []string{"true"}}
	rec, taken, err := a.createRun(ctx, c, req)
	if err != nil {
		t.Fatal(err)
	}
	if !taken {
		t.Error("createRun: the record answered by the next daemon is not said taken")
	}
	id := rec.ID
	if _, err := a.awaitCreated(ctx, c, req, rec, taken, false, &id); err != nil {
		t.Fatalf("awaitCreated: %v (stderr %q)", err, stderr.String())
	}
	if id == "run-1" {
		t.Fatalf("the run kept sandbox %s, whose making ended with the daemon", id)
	}
	if st := f.state(id); st != client.StatePending {
		t.Errorf("the sandbox made again is %s, want pending (created, not started)", st)
	}
	if len(f.requests("DELETE /v1/sandboxes/run-1")) != 1 {
		t.Errorf("the sandbox left by the daemon that went away was not removed: %v", f.requests())
	}
}
