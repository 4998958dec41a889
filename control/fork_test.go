package control_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestForkWholeOrNothing: a fork is whole or nothing. With the copies' IDs
// given and the third one in use, the third create fails for real (the store
// refuses the ID): the fork answers that error, and the two copies made before
// it are deleted (their records say so, reason fork_failed; their containers
// and networks are gone), and so is the fork's snapshot
// (its images). A fork with free IDs then makes its copies under them; IDs
// that do not fit the count, repeat or are invalid are 400s.
func TestForkWholeOrNothing(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 4*time.Minute)

	orig := e.createReady(ctx, c, "")
	taken := e.createReady(ctx, c, uniq("taken")).ID
	before := forkSnapshots(t, ctx, c, orig.ID)
	t.Cleanup(func() {
		// Whatever a failure left: the sandboxes go with the project, the snapshots here.
		testenv.ForceRemove(e.docker, labelProject, e.project)
		for _, n := range forkSnapshots(t, context.Background(), c, orig.ID) {
			_, _ = c.DeleteSnapshot(context.Background(), n)
		}
	})

	made := []string{uniq("copy-a"), uniq("copy-b")}
	_, err := c.ForkWith(ctx, orig.ID, &client.ForkRequest{IDs: append(append([]string{}, made...), taken, uniq("copy-d"))})
	wantErr(t, "a fork whose third copy's ID is in use", err, http.StatusConflict, client.ReasonIDAlreadyUsed, taken)
	for _, id := range made {
		if sb, err := c.Get(ctx, id); err != nil || sb.State != client.StateDeleted || sb.Reason != "fork_failed" {
			t.Errorf("copy %s of a failed fork: %+v %v, want deleted (fork_failed)", id, sb, err)
		}
		if left, err := testenv.Leftovers(ctx, e.docker, backend.LabelSandbox, id); err != nil || len(left) > 0 {
			t.Errorf("copy %s of a failed fork left %v %v", id, left, err)
		}
	}
	if after := forkSnapshots(t, ctx, c, orig.ID); len(after) != len(before) {
		t.Errorf("a failed fork left its snapshot: %v (before: %v)", after, before)
	}
	if out := dockerOut(t, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", "--filter", "label=dev.airlock.snapshot.sandbox="+orig.ID); strings.TrimSpace(out) != "" {
		t.Errorf("a failed fork left images: %s", out)
	}
	// The original is as it was.
	if cur, err := c.Get(ctx, orig.ID); err != nil || cur.State != client.StateReady {
		t.Errorf("the original after a failed fork: %+v %v", cur, err)
	}

	// Bad IDs: refused before anything is made.
	for _, tc := range []struct {
		req  client.ForkRequest
		word string
	}{
		{client.ForkRequest{Count: 3, IDs: []string{uniq("x"), uniq("y")}}, "ids"},
		{client.ForkRequest{IDs: []string{"same-one", "same-one"}}, "twice"},
		{client.ForkRequest{IDs: []string{"Not An ID!"}}, "ids[0]"},
	} {
		_, err := c.ForkWith(ctx, orig.ID, &tc.req)
		wantErr(t, "fork "+strings.Join(tc.req.IDs, ","), err, http.StatusBadRequest, client.ReasonInvalidRequest, tc.word)
	}
	if after := forkSnapshots(t, ctx, c, orig.ID); len(after) != len(before) {
		t.Errorf("a refused fork made a snapshot: %v", after)
	}

	// Free IDs: the copies have them.
	ok := []string{uniq("copy-e"), uniq("copy-f")}
	fk, err := c.ForkWith(ctx, orig.ID, &client.ForkRequest{IDs: ok})
	if err != nil {
		t.Fatal(err)
	}
	if len(fk.Sandboxes) != 2 || fk.Sandboxes[0].ID != ok[0] || fk.Sandboxes[1].ID != ok[1] {
		t.Fatalf("fork with ids %v made %+v", ok, fk.Sandboxes)
	}
	for _, id := range append(ok, orig.ID, taken) {
		waitReady(t, c, id)
		if _, err := c.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range append(ok, orig.ID, taken) {
		waitState(t, c, id, time.Minute, client.StateDeleted)
	}
	if _, err := c.DeleteSnapshot(ctx, fk.Snapshot.Name); err != nil {
		t.Error(err)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// forkSnapshots names the snapshots of sandbox id.
func forkSnapshots(t *testing.T, ctx context.Context, c *client.Client, id string) []string {
	t.Helper()
	list, err := c.Snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list {
		if s.Sandbox == id {
			out = append(out, s.Name)
		}
	}
	return out
}
