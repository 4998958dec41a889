package control_test

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestExecDirect: a terminal exec asked on the daemon's Unix socket gets the
// Engine's stream handed over (client.FrameDirect), so keystrokes take no hop
// through the daemon; the terminal behaves as through the frames — its size,
// (given with the request), input, output, exit code, record — and over TCP the frames carry it as
// before. A client that goes away holding the stream without saying it ended
// has its command killed, and the end recorded.
func TestExecDirect(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	port := freePort(t)
	d := e.startDaemon(binA, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--unsafe-no-token")
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, d.client, "").ID
	tcp := client.NewTCP(fmt.Sprintf("127.0.0.1:%d", port), "")

	for _, tc := range []struct {
		name   string
		c      *client.Client
		direct bool
	}{{"unix socket", d.client, true}, {"tcp", tcp, false}} {
		var out bytes.Buffer
		in, inW := io.Pipe()
		s, err := tc.c.ExecAttach(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", `read x; stty size; echo "got $x"; exit 4`}, TTY: true, Height: 33, Width: 111}, in, &out, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.WriteString(inW, "go\r") }()
		execID, code, err := s.Wait()
		inW.Close()
		if err != nil || code != 4 || !strings.Contains(out.String(), "33 111") || !strings.Contains(out.String(), "got go") {
			t.Errorf("%s: code %d, %v, output %q; want 4, the size 33 111 and got go", tc.name, code, err, out.String())
		}
		if s.Direct() != tc.direct {
			t.Errorf("%s: stream handed over = %v, want %v", tc.name, s.Direct(), tc.direct)
		}
		rec, err := d.client.WaitExec(ctx, id, execID)
		if err != nil || rec.ExitCode == nil || *rec.ExitCode != 4 {
			t.Errorf("%s: its record: %+v, %v", tc.name, rec, err)
		}
	}

	// The holder of a handed-over stream goes away without a word: the
	// command is killed, and its end recorded.
	in, inW := io.Pipe()
	defer inW.Close()
	s, err := d.client.ExecAttach(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "sleep 300; exit 6"}, TTY: true}, in, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the stream to be handed over", s.Direct)
	s.Close()
	var execID string
	eventually(t, 30*time.Second, "the exec to be recorded finished", func() bool {
		for _, ev := range allEvents(t, d.client, id) {
			if ev.Kind == "exec.started" {
				execID = ev.ExecID
			}
		}
		return slices.ContainsFunc(allEvents(t, d.client, id), func(ev client.Event) bool { return ev.Kind == "exec.finished" && ev.ExecID == execID })
	})
	rec, err := d.client.WaitExec(ctx, id, execID)
	if err != nil || rec.ExitCode == nil || *rec.ExitCode <= 128 {
		t.Errorf("the exec whose client went away: %+v (code %v), %v; want it killed (a code above 128)", rec, deref(rec), err)
	}
}

// deref is the exit code of an exec record, -1 for none.
func deref(rec *client.Exec) int {
	if rec == nil || rec.ExitCode == nil {
		return -1
	}
	return *rec.ExitCode
}
