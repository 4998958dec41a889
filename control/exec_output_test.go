package control_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestExecOutputMax: an API exec's output files are bounded by
// artifacts.exec_output_max, per stream: past it the file ends with a marker
// line, the rest of the output is discarded (the command runs to its end and
// its exit code is recorded) and the exec record says truncated. An exec under
// the limit is written whole and not marked.
func TestExecOutputMax(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeUserConfig("[artifacts]\nexec_output_max = \"64KiB\"\n")
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID

	// 4 MiB on stdout, a line on stderr, then exit 4.
	ex, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "head -c 4194304 /dev/zero | tr '\\0' x; echo err >&2; exit 4"}})
	if err != nil {
		t.Fatal(err)
	}
	done, err := c.WaitExec(ctx, id, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.ExitCode == nil || *done.ExitCode != 4 || !done.Truncated {
		t.Errorf("finished exec = %+v, want exit code 4 and truncated", done)
	}
	out, err := os.ReadFile(done.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 64 << 10
	body, marker, ok := bytes.Cut(out, []byte("\n[airlock:"))
	if !ok || len(body) != limit || len(bytes.Trim(body, "x")) != 0 {
		t.Errorf("stdout file: %d bytes before the marker, want %d bytes of output then the marker; ends %q", len(body), limit, out[max(0, len(out)-200):])
	}
	if len(out) > limit+200 || !strings.Contains(string(marker), "truncated") || !strings.Contains(string(marker), "64.0 KiB") || !bytes.HasSuffix(out, []byte("\n")) {
		t.Errorf("stdout file: %d bytes, marker %q; want at most the limit and one marker line naming it", len(out), marker)
	}
	if b, _ := os.ReadFile(done.Stderr); string(b) != "err\n" {
		t.Errorf("stderr file = %q, want %q", b, "err\n")
	}
	got, err := c.GetExec(ctx, id, ex.ID)
	if err != nil || !got.Truncated {
		t.Errorf("exec record: %+v %v, want truncated", got, err)
	}

	// Exactly the limit is not truncated.
	ex2, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "head -c 65536 /dev/zero"}})
	if err != nil {
		t.Fatal(err)
	}
	done2, err := c.WaitExec(ctx, id, ex2.ID)
	if err != nil || done2.Truncated {
		t.Errorf("an exec of exactly the limit: %+v %v, want not truncated", done2, err)
	}
	if st, err := os.Stat(done2.Stdout); err != nil || st.Size() != limit {
		t.Errorf("an exec of exactly the limit wrote %v %v", st, err)
	}
	if _, err := c.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, 30*time.Second, client.StateDeleted)
}
