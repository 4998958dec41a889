package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/clitest"
)

// TestExecEnvStaysPrivate: the values of `exec -e NAME` (from the CLI's
// environment) and `exec -e K=V`, and the env of an exec made through the
// daemon's API, reach the command and nothing else: not the Engine's exec
// configuration (docker inspect of the exec: its Cmd and Env), not the argv of
// any process on the host or in the sandbox while the command runs (the CLI's
// own argv, which the user typed, aside), not the exec's record (issue 21, 6).
func TestExecEnvStaysPrivate(t *testing.T) {
	limit(t)
	e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\nnetwork = \"none\"\n")
	fromEnv, literal := uniq("exec-t0ken"), uniq("exec-l1teral")
	apiValue := uniq("api-t0ken")
	values := []string{fromEnv, literal, apiValue}
	id := strings.TrimSpace(e.MustRun("up", "-d").Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()

	// leaks lists where a value shows: every exec of the primary (the Engine's
	// inspect) and every process's argv on the host, which holds the sandbox's
	// processes too (but the CLI's, pid skip).
	leaks := func(skip int) []string {
		t.Helper()
		var out []string
		in, err := e.Cli.ContainerInspect(ctx, "airlock-"+id)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range in.ExecIDs {
			b := execInspectRaw(t, e, x)
			for _, v := range values {
				if bytes.Contains(b, []byte(v)) {
					out = append(out, "docker inspect of exec "+x+": "+string(b))
				}
			}
		}
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, f := range procs {
			b, err := os.ReadFile(f)
			if err != nil || f == "/proc/"+strconv.Itoa(skip)+"/cmdline" {
				continue
			}
			for _, v := range values {
				if bytes.Contains(b, []byte(v)) {
					out = append(out, f+": "+strings.ReplaceAll(string(b), "\x00", " "))
				}
			}
		}
		return out
	}

	// airlock exec -e NAME -e K=V, its command waiting on stdin until the test
	// looked at every exec and process.
	cmd := e.Command(context.Background(), "exec", "-e", "MYTOK", "-e", "LIT="+literal, id, "--",
		"sh", "-c", `echo "tok=$MYTOK lit=$LIT"; read x; echo released`)
	cmd.Env = append(cmd.Env, "MYTOK="+fromEnv)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := clitest.StartCmd(t, cmd)
	eventually(t, 30*time.Second, "the exec's command to print its environment", func() bool {
		return strings.Contains(p.Stdout.String(), "\n") || isDone(p)
	})
	if want := "tok=" + fromEnv + " lit=" + literal + "\n"; p.Stdout.String() != want {
		t.Fatalf("the command saw %q, want %q\n%s", p.Stdout.String(), want, p.Stderr)
	}
	for _, l := range leaks(cmd.Process.Pid) {
		t.Errorf("an exec -e value leaked: %s", l)
	}
	stdin.Close()
	if r := p.MustWait(t, 30*time.Second); r.Code != 0 || !strings.Contains(r.Stdout, "released") {
		t.Errorf("airlock exec: %s", r)
	}

	// The same through the daemon's API (POST /v1/sandboxes/{id}/execs with env).
	c := client.New(e.Socket())
	ex, err := c.Exec(ctx, id, &client.ExecRequest{Env: []string{"APITOK=" + apiValue},
		Cmd: []string{"sh", "-c", `echo "api=$APITOK"; while [ ! -e /tmp/release ]; do sleep 0.05; done`}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the API exec's output", func() bool {
		b, _ := os.ReadFile(ex.Stdout)
		return len(b) > 0
	})
	for _, l := range leaks(0) {
		t.Errorf("an API exec's env value leaked: %s", l)
	}
	e.MustRun("exec", id, "--", "touch", "/tmp/release")
	done, err := c.WaitExec(ctx, id, ex.ID)
	if err != nil || done.ExitCode == nil || *done.ExitCode != 0 {
		t.Fatalf("API exec: %+v, %v", done, err)
	}
	if b, _ := os.ReadFile(ex.Stdout); string(b) != "api="+apiValue+"\n" {
		t.Errorf("the API exec printed %q", b)
	}
	// Neither the exec records nor the events hold a value.
	rec, _ := json.Marshal(done)
	ev := e.MustRun("events", id, "--json")
	for _, v := range values {
		if strings.Contains(string(rec), v) || strings.Contains(ev.Stdout, v) {
			t.Errorf("an exec's env value is in its record or the events")
		}
	}
	e.MustRun("down", id)
	e.assertClean()
}

// execInspectRaw is the Engine's whole answer to GET /exec/{id}/json (the
// client's ContainerExecInspect keeps only a few fields of it, not the
// ProcessConfig that holds the exec's arguments).
func execInspectRaw(t *testing.T, e *env, execID string) []byte {
	t.Helper()
	host := "docker"
	if u, err := url.Parse(e.Cli.DaemonHost()); err == nil && u.Scheme == "tcp" {
		host = u.Host
	}
	resp, err := e.Cli.HTTPClient().Get("http://" + host + "/v" + e.Cli.ClientVersion() + "/exec/" + execID + "/json")
	if err != nil {
		t.Fatalf("cannot inspect exec %s: %v", execID, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		t.Fatalf("cannot inspect exec %s: %s %s", execID, resp.Status, b)
	}
	return b
}

// isDone reports whether a background airlock process ended.
func isDone(p *proc) bool {
	select {
	case <-p.Done:
		return true
	default:
		return false
	}
}
