package control_test

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestExec: an API exec writes its output to the exec output files, records
// exec.started and exec.finished with the exit code; the files survive a restart.
func TestExec(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID
	ex, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo out-$FOO; pwd; echo err >&2; exit 3"}, Env: []string{"FOO=bar"}, Workdir: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(e.data, "airlock", "exec-output", id, ex.ID)
	if ex.Stdout != base+".stdout.log" || ex.Stderr != base+".stderr.log" {
		t.Errorf("exec output paths = %q, %q; want %s.{stdout,stderr}.log", ex.Stdout, ex.Stderr, base)
	}
	done, err := c.WaitExec(ctx, id, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.ExitCode == nil || *done.ExitCode != 3 || done.FinishedAt == nil {
		t.Errorf("finished exec = %+v, want exit code 3", done)
	}
	check := func(when string) {
		t.Helper()
		if b, err := os.ReadFile(base + ".stdout.log"); err != nil || string(b) != "out-bar\n/tmp\n" {
			t.Errorf("%s: stdout file = %q (%v)", when, b, err)
		}
		if b, err := os.ReadFile(base + ".stderr.log"); err != nil || string(b) != "err\n" {
			t.Errorf("%s: stderr file = %q (%v)", when, b, err)
		}
	}
	check("after the exec")
	evs := allEvents(t, c, id)
	si := slices.IndexFunc(evs, func(ev client.Event) bool { return ev.Kind == "exec.started" && ev.ExecID == ex.ID })
	fi := slices.IndexFunc(evs, func(ev client.Event) bool { return ev.Kind == "exec.finished" && ev.ExecID == ex.ID })
	if si < 0 || fi < si || evs[fi].ExitCode == nil || *evs[fi].ExitCode != 3 {
		t.Errorf("exec events: started at %d, finished at %d: %v", si, fi, kinds(evs))
	}
	// A caller-chosen exec ID is reserved: reusing it is refused.
	if _, err := c.Exec(ctx, id, &client.ExecRequest{ID: ex.ID, Cmd: []string{"true"}}); apiReason(err) != client.ReasonIDAlreadyUsed {
		t.Errorf("exec with a used exec id: %v, want id_already_used", err)
	}

	d.stop(t, syscall.SIGTERM)
	d = e.startDaemon(binA)
	check("after a daemon restart")
	got, err := d.client.WaitExec(ctx, id, ex.ID)
	if err != nil || got.ExitCode == nil || *got.ExitCode != 3 || got.Stdout != ex.Stdout {
		t.Errorf("exec record after a restart: %+v %v", got, err)
	}
	// Execs still work after a restart (the daemon reopens the sandbox).
	ex2, err := d.client.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"echo", "again"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := d.client.WaitExec(ctx, id, ex2.ID); err != nil || got.ExitCode == nil || *got.ExitCode != 0 {
		t.Errorf("exec after a restart: %+v %v", got, err)
	}
	if b, _ := os.ReadFile(ex2.Stdout); string(b) != "again\n" {
		t.Errorf("exec after a restart wrote %q", b)
	}
	if _, err := d.client.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, d.client, id, 30*time.Second, client.StateDeleted)
	testenv.AssertNoLeftovers(t, e.docker, "dev.airlock.sandbox", id)
}
