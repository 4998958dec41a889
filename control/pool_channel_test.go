package control_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// stamp is t as the Engine's events take it: seconds.nanoseconds.
func stamp(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }

// poolChannelText is an idle sandbox with a warm pool of 1.
const poolChannelText = `
[sandbox]
image = "{{image}}"
network = "none"

[sandbox.pool]
size = 1
`

// warmPoolOfOne starts a daemon of its own and warms a pool of one idle
// sandbox (poolChannelText): the env, its client, a context and the
// manifest source of the pool.
func warmPoolOfOne(t *testing.T) (*env, *client.Client, context.Context, client.ManifestSource) {
	t.Helper()
	e := newEnv(t)
	c := e.startDaemon(binA).client
	ctx := ctxT(t, 3*time.Minute)
	src := client.ManifestSource{ManifestTOML: strings.ReplaceAll(poolChannelText, "{{image}}", e.image), ProjectDir: e.project}
	if p, err := c.WarmPool(ctx, &client.WarmRequest{ManifestSource: src}); err != nil || p.Ready != 1 {
		t.Fatalf("warm: %+v %v", p, err)
	}
	return e, c, ctx, src
}

// TestPoolChannelExecs: a sandbox a program claimed from a warm pool runs its
// plain execs through the command channel it opened while parked (no Engine
// exec is made for one), each with its own output, stderr and exit code, its
// timeout, its signal and its background output as any exec; an exec with
// input goes through the Engine; once the channel's process is gone execs
// still run (through the Engine).
func TestPoolChannelExecs(t *testing.T) {
	parallel(t)
	e, c, ctx, src := warmPoolOfOne(t)
	sb, err := c.Create(ctx, &client.CreateRequest{Kind: "up", Start: true, ManifestSource: src})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, sb.ID)
	ready, err := c.Get(ctx, sb.ID)
	if err != nil || ready.Container == "" {
		t.Fatalf("the record: %+v %v", ready, err)
	}
	if !strings.Contains(dumpEvents(c, sb.ID), "pool.claimed") {
		t.Fatalf("not claimed from the pool:\n%s", dumpEvents(c, sb.ID))
	}
	// The Engine execs made in the sandbox's container since a time.
	engineExecs := func(since time.Time) int {
		t.Helper()
		ectx, cancel := context.WithCancel(ctx)
		defer cancel()
		evs, errc := e.docker.Events(ectx, events.ListOptions{
			Since: stamp(since), Until: stamp(time.Now().Add(500 * time.Millisecond)),
			Filters: filters.NewArgs(filters.Arg("container", ready.Container)),
		})
		n := 0
		for {
			select {
			case ev := <-evs:
				if strings.HasPrefix(string(ev.Action), "exec_create") {
					n++
				}
			case err := <-errc:
				if err != nil && !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				return n
			}
		}
	}
	run := func(req *client.ExecRequest) (string, string, int) {
		t.Helper()
		var out, errb bytes.Buffer
		_, code, err := c.ExecStream(ctx, sb.ID, req, &out, &errb)
		if err != nil {
			t.Fatalf("exec %v: %v", req.Cmd, err)
		}
		return out.String(), errb.String(), code
	}

	before := time.Now()
	out, errs, code := run(&client.ExecRequest{Cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
	if out != "out\n" || errs != "err\n" || code != 3 {
		t.Errorf("a plain exec: %q %q %d, want out, err and 3", out, errs, code)
	}
	if n := engineExecs(before); n != 0 {
		t.Errorf("a plain exec of a claimed sandbox made %d Engine execs, want none (the channel)", n)
	}
	if out, _, code := run(&client.ExecRequest{Cmd: []string{"sh", "-c", "cat"}, Stdin: []byte("in\n")}); out != "in\n" || code != 0 {
		t.Errorf("an exec with input: %q %d", out, code)
	}
	if _, _, code := run(&client.ExecRequest{Cmd: []string{"sleep", "30"}, ExecControl: client.ExecControl{Timeout: 1}}); code != 124 {
		t.Errorf("an exec past its timeout: code %d, want 124", code)
	}
	bg, err := c.Exec(ctx, sb.ID, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo started; exec sleep 300"}, ExecControl: client.ExecControl{Background: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SignalExec(ctx, sb.ID, bg.ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	if rec, err := c.WaitExec(ctx, sb.ID, bg.ID); err != nil || rec.ExitCode == nil || *rec.ExitCode != 137 {
		t.Errorf("a background exec killed: %+v %v, want 137", rec, err)
	}

	// The channel's process killed: execs go on, through the Engine.
	run(&client.ExecRequest{Cmd: []string{"sh", "-c", "pkill -f 'supervise channel' || kill $(pgrep -f 'supervise channel')"}})
	for i := range 3 {
		if out, _, code := run(&client.ExecRequest{Cmd: []string{"echo", "again"}}); out != "again\n" || code != 0 {
			t.Errorf("exec %d after the channel's end: %q %d", i, out, code)
		}
	}
	if _, err := c.Delete(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, sb.ID, time.Minute, client.StateDeleted)
	if _, err := c.DrainPools(ctx, &client.DrainRequest{Project: e.project}); err != nil {
		t.Fatal(err)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// TestPoolCreateWaitsForOneBeingMade: a create that finds its pool empty
// while the pool makes a sandbox waits for that one, due sooner than a cold
// start, instead of starting cold (it missed, "empty", and started cold).
func TestPoolCreateWaitsForOneBeingMade(t *testing.T) {
	parallel(t)
	e, c, ctx, src := warmPoolOfOne(t)
	first, err := c.Create(ctx, &client.CreateRequest{Kind: "up", Start: true, ManifestSource: src})
	if err != nil {
		t.Fatal(err)
	}
	// The pool, empty now, makes its next one.
	for p := poolOf(t, c, e.project); p.Starting == 0; p = poolOf(t, c, e.project) {
		if p.Ready > 0 {
			t.Fatalf("the pool refilled before the second create could find it making one: %+v", p)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the pool does not refill: %+v", p)
		case <-time.After(5 * time.Millisecond):
		}
	}
	second, err := c.Create(ctx, &client.CreateRequest{Kind: "up", Start: true, ManifestSource: src})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{first.ID, second.ID} {
		waitReady(t, c, id)
		if h := dumpEvents(c, id); !strings.Contains(h, "pool.claimed") || strings.Contains(h, "pool.missed") {
			t.Errorf("sandbox %s did not take a parked sandbox:\n%s", id, h)
		}
	}
	if p := poolOf(t, c, e.project); p.Hits != 2 || len(p.Misses) != 0 {
		t.Errorf("pool counters: %d hits, misses %v; want 2 and none", p.Hits, p.Misses)
	}
	for _, id := range []string{first.ID, second.ID} {
		if _, err := c.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		waitState(t, c, id, time.Minute, client.StateDeleted)
	}
	if _, err := c.DrainPools(ctx, &client.DrainRequest{Project: e.project}); err != nil {
		t.Fatal(err)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}
